"""Generator backend names, importable without torch (the workflow reads them at parse time)."""

# Every backend fourloops.loading can load.
BACKENDS = ("omnigen2", "qwen_image_edit_plus")
# Backends the smoke model set can build a tiny model for (OmniGen2's pipeline needs its own package).
SMOKE_BACKENDS = ("qwen_image_edit_plus",)
# The most views one pipeline call makes (fourloops.generate.Generator.max_batch): OmniGen2's pipeline takes a list of
# prompts, each with its own references; diffusers' Qwen-Image-Edit-Plus pipeline refuses more than one prompt.
MAX_BATCH = {"omnigen2": 64, "qwen_image_edit_plus": 1}
