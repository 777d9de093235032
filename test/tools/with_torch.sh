#!/bin/sh
# Runs PYTHON SCRIPT ARGS... when PYTHON holds torch, torchvision and safetensors; otherwise fails
# saying how to get them (a test that cannot run is a failure, not a skip).
#   with_torch.sh PYTHON SCRIPT [ARGS...]
python=$1
if ! "$python" -c 'import torch, torchvision, safetensors' 2>/dev/null; then
  echo "with_torch.sh: no torch, torchvision and safetensors in PTRAIN_TORCH_PYTHON ($python): bench/torch_venv.sh" \
       "makes a venv with torch, then pip install torchvision safetensors into it" >&2
  exit 1
fi
shift
exec "$python" "$@"
