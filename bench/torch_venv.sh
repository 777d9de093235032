#!/bin/sh
# Prints the Python of a virtual environment holding the PyTorch a user installs today
# (`pip install torch` from PyPI; it runs on the CPU without a GPU), creating the environment when
# it is missing: PTRAIN_TORCH_VENV, default ~/.cache/ptrain/torch-venv. Exits non-zero with a
# message when it can be neither found nor made (no python3-venv, no reach to PyPI).
set -eu
venv=${PTRAIN_TORCH_VENV:-${HOME:-/tmp}/.cache/ptrain/torch-venv}
if ! "$venv/bin/python" -c 'import torch' >/dev/null 2>&1; then
  echo "torch_venv.sh: installing pip's torch into $venv (a few GB, once)" >&2
  python3 -m venv "$venv" >&2 || { echo "torch_venv.sh: python3 -m venv $venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet torch >&2 || { echo "torch_venv.sh: pip install torch into $venv failed" >&2; exit 1; }
fi
echo "$venv/bin/python"
