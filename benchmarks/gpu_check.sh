#!/usr/bin/env bash
# The GPU check in one line (docs/performance.md, "GPU check"):
#
#   bash benchmarks/gpu_check.sh [options of `python -m benchmarks gpu`]
#
# On a machine with this repo's uv environment it runs there. On a GPU machine without network
# (a torch image with no comlrl), first run `bash benchmarks/gpu_check.sh --prepare` where the
# package registry is reachable: it puts our wheels and the reference's in benchmarks/.gpu-wheels
# (git-ignored, about 31 MiB); take that folder along and the check installs both from it,
# offline, next to the machine's own torch and transformers. The reference is used only when
# that works offline; otherwise the check says so and skips its column.
# A global guard stops everything 60 s after the check's own budget (the JSON is written
# after every phase, so a stopped run keeps what it finished).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=benchmarks/.gpu-wheels
REFERENCE=comlrl==1.4.3
# Provided by any torch + transformers environment; not carried, to keep the folder small.
PROVIDED="torch transformers tokenizers safetensors huggingface-hub hf-xet numpy pandas pyarrow
  pyyaml tqdm packaging filelock fsspec regex requests urllib3 certifi idna charset-normalizer
  jinja2 markupsafe sympy mpmath networkx typing-extensions triton setuptools"

if [[ "${1:-}" == "--prepare" ]]; then
    rm -rf "$WHEELS" && mkdir -p "$WHEELS/ours" "$WHEELS/ref" || exit 1
    uv build --all-packages --wheel -o "$WHEELS/ours" || exit 1
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS/ref" "$REFERENCE" || exit 1
    # pytest for the vLLM phase's conformance suite (the phase runs where vLLM is installed).
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS/ours" pytest || exit 1
    for name in $PROVIDED; do
        rm -f "$WHEELS/ours/${name//-/_}"-[0-9]*.whl "$WHEELS/ours/$name"-[0-9]*.whl
    done
    for name in $PROVIDED; do
        rm -f "$WHEELS/ref/${name//-/_}"-[0-9]*.whl "$WHEELS/ref/$name"-[0-9]*.whl
    done
    du -sh "$WHEELS"
    exit 0
fi

budget=480
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [[ "${args[i]}" == "--budget" ]] && budget="${args[i + 1]:-480}"
done

# Offline installs: every carried wheel, without dependency resolution, into a folder of its
# own that goes on PYTHONPATH; everything else (torch, transformers) is the machine's own.
install_offline() {
    local target="$1"
    shift
    rm -rf "$target"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$target" "$@"
}

if command -v uv >/dev/null 2>&1 && [[ -x .venv/bin/python ]] &&
    .venv/bin/python -c 'import importlib.util as u; raise SystemExit(u.find_spec("vllm") is None)' 2>/dev/null; then
    # An env synced with the vllm extra (`uv sync --no-dev --extra vllm --group gpu-check`):
    # run it as it is, since a plain `uv run` would sync the dev group back and drop vLLM.
    PY=(uv run --frozen --offline --no-sync python)
elif command -v uv >/dev/null 2>&1 && [[ -d .venv ]]; then
    PY=(uv run --frozen --offline python)
elif python3 -c 'import comlrl.reinforce, comlrl.ac, comlrl.pbrl' 2>/dev/null; then
    PY=(python3)
elif [[ -d "$WHEELS/ours" ]]; then
    install_offline /tmp/comlrl-gpu-ours "$WHEELS"/ours/*.whl || exit 1
    export PYTHONPATH=/tmp/comlrl-gpu-ours${PYTHONPATH:+:$PYTHONPATH}
    PY=(python3)
else
    echo "gpu_check.sh: no environment with comlrl here; run 'uv sync', or" \
        "'bash benchmarks/gpu_check.sh --prepare' where the registry is reachable." >&2
    exit 2
fi

REF=auto
# A reference venv counts only with its marker (it is moved into place only when complete).
if [[ -x benchmarks/.venv-ref/bin/python && -f benchmarks/.venv-ref/comlrl-benchmark.json ]]; then
    REF=benchmarks/.venv-ref/bin/python
elif [[ -d "$WHEELS/ref" ]]; then
    # The check runs the reference without PYTHONPATH, so a wrapper sets the reference's own.
    if install_offline /tmp/comlrl-gpu-ref "$WHEELS"/ref/*.whl; then
        REF=/tmp/comlrl-gpu-ref-python
        printf '#!/bin/sh\nPYTHONPATH=/tmp/comlrl-gpu-ref exec %s "$@"\n' "$(command -v python3)" >"$REF"
        chmod +x "$REF"
    else
        echo "gpu_check.sh: the reference could not be installed offline (above)" >&2
    fi
elif command -v uv >/dev/null 2>&1 && [[ -d .venv ]]; then
    # from uv's cache only: no network; on failure one line, and the reference column is skipped
    UV_OFFLINE=1 "${PY[@]}" -m benchmarks.refvenv >/dev/null 2>/tmp/comlrl-refvenv.log &&
        REF=benchmarks/.venv-ref/bin/python ||
        echo "gpu_check.sh: no reference venv ($(tail -n 1 /tmp/comlrl-refvenv.log)); its column is skipped" >&2
fi

guard=$(printf '%.0f' "$budget" 2>/dev/null) || guard=480
exec timeout -k 10 "$((guard + 60))" "${PY[@]}" -m benchmarks gpu --reference-python "$REF" "$@"
