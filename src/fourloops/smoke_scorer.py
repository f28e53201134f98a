"""The smoke set's scorer: a tiny, randomly initialised Qwen3-VL and a tiny LoRA adapter over it.

Built from configs with fixed seeds (the tokenizer and processor in memory, as smoke_generators does for
Qwen), written with `save_pretrained` as `<out>/base` and `<out>/adapter`, and loaded by
`fourloops.scorer.load_scorer` exactly as the real Qwen3-VL-8B + EditScore pair is. It answers noise, so
its grades are NaN with the reason: that is the honest smoke outcome.
"""

from __future__ import annotations

from pathlib import Path

from fourloops import io

# Qwen's chat layout for a user turn of images then text (the real processor brings its own template).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY = {"hidden": 16, "layers": 1, "heads": 2, "head_dim": 8, "vision_hidden": 16, "patch": 16,
        "max_pixels": 64 * 64, "lora_rank": 2, "lora_targets": ["q_proj", "v_proj"]}


def _build(seed: int):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration,
                              Qwen3VLProcessor, Qwen3VLVideoProcessor)

    from fourloops.smoke_generators import _tiny_qwen_tokenizer

    t = TINY
    tokenizer, vocab = _tiny_qwen_tokenizer()
    # each image becomes 2x2 merged vision tokens at most: the prompt stays a few thousand byte tokens
    images = Qwen2VLImageProcessor(patch_size=t["patch"], merge_size=2, temporal_patch_size=2,
                                   min_pixels=t["max_pixels"], max_pixels=t["max_pixels"])
    processor = Qwen3VLProcessor(image_processor=images, tokenizer=tokenizer, video_processor=Qwen3VLVideoProcessor(),
                                 chat_template=CHAT_TEMPLATE)
    special = {"bos_token_id": vocab["<|endoftext|>"], "eos_token_id": vocab["<|im_end|>"],
               "pad_token_id": vocab["<|endoftext|>"]}
    config = Qwen3VLConfig(
        text_config={"vocab_size": len(vocab), "hidden_size": t["hidden"], "intermediate_size": t["hidden"],
                     "num_hidden_layers": t["layers"], "num_attention_heads": t["heads"],
                     "num_key_value_heads": t["heads"], "head_dim": t["head_dim"], "max_position_embeddings": 8192,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [1, 1, 2],
                                         "mrope_interleaved": True}, **special},
        vision_config={"depth": 1, "hidden_size": t["vision_hidden"], "intermediate_size": t["vision_hidden"],
                       "num_heads": 2, "out_hidden_size": t["hidden"], "patch_size": t["patch"],
                       "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 16,
                       "deepstack_visual_indexes": [0]},
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    base = Qwen3VLForConditionalGeneration(config).eval()
    base.generation_config.eos_token_id = special["eos_token_id"]
    base.generation_config.pad_token_id = special["pad_token_id"]
    torch.manual_seed(seed + 1)
    # random (not zero) LoRA weights, so a wrongly skipped adapter would change the answers
    lora = LoraConfig(r=t["lora_rank"], lora_alpha=2 * t["lora_rank"], target_modules=t["lora_targets"],
                      init_lora_weights=False)
    return base, processor, lora


def build_smoke_scorer(out_dir: str, seed: int) -> dict:
    """Write `out_dir/base` (model + processor) and `out_dir/adapter`; a killed build leaves no complete directory."""
    import torch
    from peft import get_peft_model

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"model_set": "smoke", "kind": "scorer", "seed": int(seed), "built_by": "fourloops.smoke_scorer",
            "tiny": TINY}
    with io.atomic_dir(out) as tmp:
        with torch.random.fork_rng(devices=[]):
            base, processor, lora = _build(int(seed))
            base.save_pretrained(tmp / "base", safe_serialization=True)
            processor.save_pretrained(tmp / "base")
            get_peft_model(base, lora).save_pretrained(tmp / "adapter", safe_serialization=True)
        io.write_json(tmp / "smoke.json", meta)
    return meta
