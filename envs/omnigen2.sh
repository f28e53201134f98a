#!/usr/bin/env bash
# Clone OmniGen2 at the commit fourloops' adapter was written against and make it importable.
# Needs network (GitHub). Usage: envs/omnigen2.sh [/opt/OmniGen2]
set -euo pipefail
dest=${1:-/opt/OmniGen2}
commit=$(python -c 'from fourloops.loading import OMNIGEN2_COMMIT; print(OMNIGEN2_COMMIT)')
[ -d "$dest/.git" ] || git clone https://github.com/VectorSpaceLab/OmniGen2 "$dest"
git -C "$dest" fetch -q origin "$commit" 2>/dev/null || true
git -C "$dest" checkout -q "$commit"
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$dest" > "$site/omnigen2-checkout.pth"
python -c 'import omnigen2, sys; print("omnigen2 importable from", omnigen2.__path__[0])'
