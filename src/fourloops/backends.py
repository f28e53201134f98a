"""Generator backend names, importable without torch (the workflow reads them at parse time)."""

# Every backend fourloops.loading can load.
BACKENDS = ("omnigen2", "qwen_image_edit_plus")
# Backends the smoke model set can build a tiny model for (OmniGen2's pipeline needs its own package).
SMOKE_BACKENDS = ("qwen_image_edit_plus",)
