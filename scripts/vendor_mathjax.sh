#!/usr/bin/env bash
# Vendor MathJax 3 into book/_static/mathjax/ so that the book renders math offline.
#
# Only the single-file component es5/tex-svg-full.js is kept (~2.2 MB): it
# contains the TeX input with every extension and the SVG output, so it never
# fetches fonts or further components. _config.yml points Sphinx's
# mathjax_path at it (relative to the HTML output's _static/).
#
# Usage: scripts/vendor_mathjax.sh [VERSION]   (default 3.2.2; needs npm)
set -euo pipefail
usage="usage: scripts/vendor_mathjax.sh [VERSION]   (a MathJax 3 release such as 3.2.2, the default; needs npm)"
# Checked before npm runs: '--help' or a typo went to the registry as the package 'mathjax@--help'.
case "${1:-}" in -h|--help) echo "${usage}"; exit 0;; esac
if [ $# -gt 1 ]; then
    echo "${usage}" >&2
    echo "vendor_mathjax.sh: error: takes at most one VERSION, got $#: $*" >&2
    exit 2
fi
version="${1:-3.2.2}"
if ! [[ ${version} =~ ^3\.[0-9]+\.[0-9]+$ ]]; then
    echo "${usage}" >&2
    echo "vendor_mathjax.sh: error: VERSION must be a MathJax 3 release like 3.2.2 (es5/tex-svg-full.js is MathJax 3's" \
         "layout), got '${version}'" >&2
    exit 2
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=book/_static/mathjax
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

(cd "${tmp}" && npm pack --silent "mathjax@${version}" >/dev/null && tar xzf mathjax-*.tgz)
mkdir -p "${dest}"
sha256=$(sha256sum "${tmp}/package/es5/tex-svg-full.js" | cut -d' ' -f1)
cat > "${tmp}/VENDORED.txt" <<TXT
MathJax ${version} (Apache-2.0, see LICENSE), from the npm package mathjax@${version}:
  es5/tex-svg-full.js  sha256 ${sha256}
Re-vendor with scripts/vendor_mathjax.sh [VERSION].
TXT
# each file copied beside its target, then renamed over it: an interrupted run leaves the old file whole
for pair in "package/es5/tex-svg-full.js:tex-svg-full.js" "package/LICENSE:LICENSE" "VENDORED.txt:VENDORED.txt"; do
    install -m 644 "${tmp}/${pair%%:*}" "${dest}/.${pair#*:}.tmp"
    mv -f "${dest}/.${pair#*:}.tmp" "${dest}/${pair#*:}"
done
echo "vendored MathJax ${version} into ${dest}/"
