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
version="${1:-3.2.2}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=book/_static/mathjax
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

(cd "${tmp}" && npm pack --silent "mathjax@${version}" >/dev/null && tar xzf mathjax-*.tgz)
mkdir -p "${dest}"
install -m 644 "${tmp}/package/es5/tex-svg-full.js" "${dest}/tex-svg-full.js"
install -m 644 "${tmp}/package/LICENSE" "${dest}/LICENSE"
sha256=$(sha256sum "${dest}/tex-svg-full.js" | cut -d' ' -f1)
cat > "${dest}/VENDORED.txt" <<TXT
MathJax ${version} (Apache-2.0, see LICENSE), from the npm package mathjax@${version}:
  es5/tex-svg-full.js  sha256 ${sha256}
Re-vendor with scripts/vendor_mathjax.sh [VERSION].
TXT
echo "vendored MathJax ${version} into ${dest}/"
