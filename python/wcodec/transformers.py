"""wcodec.transformers: build a Hugging Face transformers model from a model
directory whose weights are .wcodec shards (as `wcodec pack -u` writes it),
without a mount.

    from transformers import AutoModelForCausalLM
    import wcodec.transformers
    model = wcodec.transformers.from_pretrained(AutoModelForCausalLM, "llama-packed",
                                                device_map="cuda", dtype=torch.bfloat16)

The model is built from config.json with its parameters on the meta device
(no memory, no random initialisation), then every parameter is taken from
the checkpoint loaded by wcodec.torch.load_checkpoint straight onto the
device (load_state_dict(assign=True)), tied weights are tied again, and the
buffers the model computes itself (rotary frequencies) are moved to the
device. The weights are the checkpoint's bytes, so the logits equal those of
the same model loaded by transformers from the original files.

Supported: models whose state dict keys are the checkpoint's names (what
save_pretrained writes), device_map a single device ("cpu", "cuda",
"cuda:N", a torch.device). Not supported: device_map="auto" or a per-layer
map, quantization configs, adapters, and legacy key renames; use the mount
for those (from_pretrained of the mounted directory reads the same bytes).
"""
import os

import torch

from .torch import empty_weights, load_checkpoint

__all__ = ["from_pretrained"]


def _build(model_class, config, dtype):
    kwargs = {}
    if dtype is not None:
        kwargs["torch_dtype"] = dtype
    with empty_weights():
        if hasattr(model_class, "from_config"):
            try:
                return model_class.from_config(config, **kwargs)
            except TypeError:  # transformers 5 names it dtype
                return model_class.from_config(config, **({"dtype": dtype} if dtype is not None else {}))
        return model_class(config)


def from_pretrained(model_class, directory, device_map="cpu", dtype=None, torch_dtype=None, config=None):
    """A `model_class` (an Auto class such as AutoModelForCausalLM, or a
    model class) built from `directory`'s config.json (or `config`) with its
    weights from the directory's checkpoint (.wcodec or safetensors shards,
    index honoured), on device `device_map`, in eval mode. dtype (or its old
    name torch_dtype): floating-point weights are cast to it, as
    transformers does; None keeps the checkpoint's dtypes.
    Raises ValueError (a device_map other than one device; weights the model
    has that the checkpoint lacks), and what load_checkpoint raises
    (FileNotFoundError, KeyError, WcodecError)."""
    import transformers

    dtype = dtype if dtype is not None else torch_dtype
    if isinstance(dtype, str) and dtype != "auto":
        dtype = getattr(torch, dtype)
    if dtype == "auto":
        dtype = None
    if not isinstance(device_map, (str, int, torch.device)) or device_map == "auto":
        raise ValueError(f"device_map {device_map!r}: wcodec.transformers loads onto one device")
    device = torch.device(f"cuda:{device_map}" if isinstance(device_map, int) else device_map)
    if config is None:
        config = transformers.AutoConfig.from_pretrained(os.fspath(directory))
    model = _build(model_class, config, dtype)
    state = load_checkpoint(directory, device=device)
    if dtype is not None:
        state = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in state.items()}
    model.load_state_dict(state, strict=False, assign=True)
    del state
    model.tie_weights()
    missing = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if missing:
        raise ValueError(f"{directory}: the checkpoint lacks {len(missing)} weights of the model, "
                         f"for example {missing[:3]}")
    model.to(device)  # the buffers the model made itself
    gen = os.path.join(os.fspath(directory), "generation_config.json")
    if os.path.isfile(gen) and getattr(model, "can_generate", lambda: False)():
        model.generation_config = transformers.GenerationConfig.from_pretrained(os.fspath(directory))
    return model.eval()
