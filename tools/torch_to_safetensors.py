#!/usr/bin/env python3
"""Turns a PyTorch state dict file (.pth, .pt, .bin) into a safetensors file that ptrain's
load_state_dict reads, under the same names (`layer1.0.conv1.weight`).

    python tools/torch_to_safetensors.py resnet18.pth resnet18.safetensors

Needs torch and safetensors (pip install torch safetensors). The file is read with
torch.load(map_location="cpu", weights_only=True) where torch has weights_only, so loading it runs no
code from it. A dict whose tensors sit under "state_dict" or "model" (a training checkpoint) is
read there. Tensors are written contiguous in their own dtype: float16, bfloat16, float32 and
float64 as they are, and int64 (batch norm's num_batches_tracked, which ptrain loads when the model
has it too); any other dtype and any entry that is not a tensor are refused, each named.
"""
import argparse
import inspect
import os
import sys

KEPT_DTYPES = ("float16", "bfloat16", "float32", "float64", "int64")


class ConversionError(Exception):
    pass


def load_torch_file(path):
    import torch

    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file")
    kwargs = {"map_location": "cpu"}
    if "weights_only" in inspect.signature(torch.load).parameters:
        kwargs["weights_only"] = True
    try:
        return torch.load(path, **kwargs)
    except Exception as e:  # torch raises pickle, zip and its own errors alike
        raise ConversionError(f"{path}: torch.load cannot read it as a state dict: {e}") from e


def find_state_dict(loaded, path):
    """The name -> tensor mapping: the file's dict, or the one under "state_dict" or "model"."""
    if not isinstance(loaded, dict):
        raise ConversionError(f"{path}: not a state dict: torch.load gave a {type(loaded).__name__}, "
                              "expected a dict of names to tensors (save model.state_dict(), not the model)")
    for key in ("state_dict", "model"):
        if isinstance(loaded.get(key), dict):
            return loaded[key]
    return loaded


def checked_tensors(state, path):
    """The state dict's tensors, contiguous; every non-tensor entry and unsupported dtype refused."""
    import torch

    not_tensors = [str(name) for name, value in state.items() if not isinstance(value, torch.Tensor)]
    if not_tensors:
        raise ConversionError(f"{path}: not a state dict of tensors: entries {', '.join(not_tensors)} are not tensors")
    if not state:
        raise ConversionError(f"{path}: the state dict is empty")
    wrong = [f"{name} ({str(t.dtype).removeprefix('torch.')})" for name, t in state.items()
             if str(t.dtype).removeprefix("torch.") not in KEPT_DTYPES]
    if wrong:
        raise ConversionError(f"{path}: ptrain reads {', '.join(KEPT_DTYPES)} tensors; these are not: {', '.join(wrong)}")
    # Tied weights share storage, which safetensors refuses: each name gets its own copy.
    return {str(name): t.detach().clone().contiguous() for name, t in state.items()}


def convert(source, target):
    from safetensors.torch import save_file

    tensors = checked_tensors(find_state_dict(load_torch_file(source), source), source)
    save_file(tensors, target, metadata={"format": "pt"})
    return tensors


def main(argv=None):
    parser = argparse.ArgumentParser(description="Turns a PyTorch state dict file (.pth/.pt/.bin) into a "
                                                 "safetensors file with the same tensor names, for ptrain.")
    parser.add_argument("source", help="the torch.save'd state dict (a dict of tensors, possibly under "
                                       "'state_dict' or 'model')")
    parser.add_argument("target", help="the safetensors file to write")
    args = parser.parse_args(argv)
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"torch_to_safetensors: needs torch and safetensors (pip install torch safetensors): {e}", file=sys.stderr)
        return 1
    try:
        tensors = convert(args.source, args.target)
    except ConversionError as e:
        print(f"torch_to_safetensors: {e}", file=sys.stderr)
        return 1
    print(f"torch_to_safetensors: wrote {len(tensors)} tensors to {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
