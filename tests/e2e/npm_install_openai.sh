#!/usr/bin/env bash
# Run by ctest before test_openai_sdk: puts the official OpenAI JS SDK (an npm package, not a Debian one)
# under PREFIX/node_modules, where that test's NODE_PATH points. Where npm or its registry cannot be
# reached this exits 77, which ctest reports as skipped (SKIP_RETURN_CODE), and test_openai_sdk then
# skips as well. Usage: npm_install_openai.sh NPM PREFIX
set -u
npm=$1 prefix=$2
[[ -f $prefix/node_modules/openai/package.json ]] && exit 0  # installed by an earlier run: no network needed
# A major version pinned so that a new SDK cannot change the test under us; short retries, so that a
# machine without the registry skips within a minute instead of waiting out npm's default back-off.
if ! timeout 180 "$npm" install --prefix "$prefix" --no-audit --no-fund --no-save \
        --fetch-retries=1 --fetch-timeout=20000 openai@6; then
    echo "npm could not install openai: test_openai_sdk will skip" >&2
    exit 77
fi
