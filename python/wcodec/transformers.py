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

Tensor parallelism (transformers 5's `tp_plan`), under torchrun:

    model = wcodec.transformers.from_pretrained(AutoModelForCausalLM, "llama-packed",
                                                tp_plan="auto", dtype=torch.bfloat16)

builds the model as transformers' own `from_pretrained(..., tp_plan="auto")`
does (its device mesh, its DTensor parameters and forward hooks, by its own
`prepare_distribute_model` and `maybe_distribute_model`), and fills each
rank's shards with wcodec.torch.load_checkpoint(..., process_group=the
mesh's group, tp_plan=each parameter's placement): a rank reads and decodes
only the tiles its shards touch, and the ranks of a host read each packed
byte once between them.

Supported: models whose state dict keys are the checkpoint's names (what
save_pretrained writes), device_map a single device ("cpu", "cuda",
"cuda:N", a torch.device), or tp_plan. Not supported: device_map="auto" or
a per-layer map, quantization configs, adapters, and legacy key renames;
use the mount for those (from_pretrained of the mounted directory reads the
same bytes).
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


def _cast(state, dtype):
    """Floating-point tensors of state cast to dtype, as transformers does
    (None: as they are)."""
    if dtype is None:
        return state
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in state.items()}


def _placement_modes(model, world):
    """{parameter name: "colwise" | "rowwise" | None} for load_checkpoint's
    tp_plan, from the placements transformers gave each parameter: Shard(0)
    is colwise, Shard(last dim) rowwise, where the dim divides evenly by the
    world size (DTensor's shards are then exactly tensor_split's); None:
    loaded whole, then distributed by torch (Replicate, uneven or other
    placements, plain tensors)."""
    from torch.distributed.tensor import DTensor, Shard

    modes = {}
    for name, p in model.named_parameters():
        mode = None
        if isinstance(p, DTensor) and len(p.placements) == 1 and isinstance(p.placements[0], Shard):
            dim = p.placements[0].dim % p.ndim
            if p.shape[dim] % world == 0:
                mode = "colwise" if dim == 0 else "rowwise" if dim == p.ndim - 1 else None
        modes[name] = mode
    return modes


def _assign_shards(model, state):
    """Set each parameter of `model` (meta DTensors or tensors) from state
    (this rank's shard, or the whole tensor where _placement_modes gave
    None); names absent from state are left as they are."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    for name, p in list(model.named_parameters()):
        t = state.pop(name, None)
        if t is None:
            continue
        if isinstance(p, DTensor):
            if tuple(t.shape) == tuple(p.shape):  # whole: let torch cut it (no communication)
                t = distribute_tensor(t, p.device_mesh, p.placements, src_data_rank=None)
            else:
                t = DTensor.from_local(t, p.device_mesh, p.placements, run_check=False, shape=p.shape,
                                       stride=p.stride())
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name) if module_name else model
        setattr(module, leaf, torch.nn.Parameter(t, requires_grad=p.requires_grad and t.is_floating_point()))


def _from_pretrained_tp(model_class, directory, config, dtype, tp_plan, tp_size):
    """from_pretrained with tensor parallelism (the module docstring)."""
    from transformers.distributed import DistributedConfig

    model = _build(model_class, config, dtype)
    klass = type(model)
    dcfg, _, mesh = klass.prepare_distribute_model(DistributedConfig(tp_plan=tp_plan, tp_size=tp_size))
    model = klass.maybe_distribute_model(model, dcfg, mesh)
    tp_mesh = mesh["tp"] if mesh.ndim > 1 else mesh
    group = tp_mesh.get_group()
    device = torch.device(tp_mesh.device_type, torch.cuda.current_device()) if tp_mesh.device_type == "cuda" \
        else torch.device(tp_mesh.device_type)
    modes = _placement_modes(model, tp_mesh.size())
    state = load_checkpoint(directory, device=device, process_group=group,
                            tp_plan={name: mode for name, mode in modes.items() if mode})
    state = _cast(state, dtype)
    _assign_shards(model, state)
    if state:  # buffers the checkpoint holds
        model.load_state_dict(state, strict=False, assign=True)
    return model, device


def from_pretrained(model_class, directory, device_map="cpu", dtype=None, torch_dtype=None, config=None,
                    tp_plan=None, tp_size=None):
    """A `model_class` (an Auto class such as AutoModelForCausalLM, or a
    model class) built from `directory`'s config.json (or `config`) with its
    weights from the directory's checkpoint (.wcodec or safetensors shards,
    index honoured), on device `device_map`, in eval mode. dtype (or its old
    name torch_dtype): floating-point weights are cast to it, as
    transformers does; None keeps the checkpoint's dtypes.

    tp_plan ("auto", or a {module glob: style} dict) and tp_size, as
    transformers 5's from_pretrained takes them (every rank of a torchrun
    calls it): the model sharded over the ranks as transformers shards it
    (device_map is then ignored: each rank's device is the one transformers
    picks, cuda:LOCAL_RANK or the CPU), each rank loading only its shards
    (module docstring). Needs transformers 5 (transformers.distributed).

    Raises ValueError (a device_map other than one device; weights the model
    has that the checkpoint lacks), ImportError (tp_plan with a transformers
    without transformers.distributed), and what load_checkpoint raises
    (FileNotFoundError, KeyError, WcodecError; with tp_plan on every rank)."""
    import transformers

    dtype = dtype if dtype is not None else torch_dtype
    if isinstance(dtype, str) and dtype != "auto":
        dtype = getattr(torch, dtype)
    if dtype == "auto":
        dtype = None
    if config is None:
        config = transformers.AutoConfig.from_pretrained(os.fspath(directory))
    if tp_plan is not None:
        model, device = _from_pretrained_tp(model_class, directory, config, dtype, tp_plan, tp_size)
        return _finish(model, directory, device, transformers)
    if not isinstance(device_map, (str, int, torch.device)) or device_map == "auto":
        raise ValueError(f"device_map {device_map!r}: wcodec.transformers loads onto one device")
    device = torch.device(f"cuda:{device_map}" if isinstance(device_map, int) else device_map)
    model = _build(model_class, config, dtype)
    state = load_checkpoint(directory, device=device)
    state = _cast(state, dtype)
    model.load_state_dict(state, strict=False, assign=True)
    del state
    return _finish(model, directory, device, transformers)


def _finish(model, directory, device, transformers):
    """Tie weights, check none is left on the meta device, move the buffers
    the model made itself to device, take the generation config."""
    model.tie_weights()
    missing = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if missing:
        raise ValueError(f"{directory}: the checkpoint lacks {len(missing)} weights of the model, "
                         f"for example {missing[:3]}")
    for m in model.modules():  # the buffers the model made itself (rotary tables)
        for k, b in m._buffers.items():
            if b is not None and b.device != device:
                m._buffers[k] = b.to(device)
    gen = os.path.join(os.fspath(directory), "generation_config.json")
    if os.path.isfile(gen) and getattr(model, "can_generate", lambda: False)():
        model.generation_config = transformers.GenerationConfig.from_pretrained(os.fspath(directory))
    return model.eval()
