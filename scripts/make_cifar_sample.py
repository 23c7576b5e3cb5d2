#!/usr/bin/env python
"""Write the small class-balanced CIFAR-10 sample shipped in ``data/cifar10-sample/``.

Selection (deterministic, no randomness): the first ``--train-per-class`` images of each
class in the standard training order (``data_batch_1`` … ``data_batch_5``) and the first
``--test-per-class`` images of each class in ``test_batch`` order.  The selected images
keep their original relative order (they are *not* grouped by class), and their
original indices are stored too.

Output: ``cifar10-sample.npz`` (a compressed ``.npz`` as from ``numpy.savez_compressed``,
written with fixed zip timestamps so that a rerun gives the same bytes) with

* ``train_images`` uint8 (n, 32, 32, 3) NHWC, ``train_labels`` int64 (n,)
* ``test_images``, ``test_labels`` likewise
* ``train_index``, ``test_index`` int64: positions in the full training / test set

and a ``README.md`` with the provenance and the file's sha256.

The default 200 + 50 images per class take about 7 MB: CIFAR images are nearly
incompressible losslessly (about 2.8 kB each after deflate).  Read it back with
:func:`fedlib.data.cifar10.load_cifar10_sample`.

Beside it, ``cifar10-labels.npz`` holds *all* 50,000 training and 10,000 test labels
(uint8, about 30 kB): enough to build the official Dir(0.1) split of the full training
set without its images — what the speed benchmark needs on a machine that does not hold
the data yet (:func:`fedlib.data.cifar10.cifar10_random_images`).

Usage::

    python scripts/make_cifar_sample.py --root ../shared/data
"""
from __future__ import annotations

import argparse
import hashlib
import io
import shlex
import sys
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fedlib._io import atomic_write  # noqa: E402
from fedlib.data.cifar10 import CIFAR10_CLASSES, load_cifar10  # noqa: E402

DEFAULT_OUT = REPO / "data" / "cifar10-sample"
FILE_NAME = "cifar10-sample.npz"
LABELS_FILE_NAME = "cifar10-labels.npz"


def first_per_class(labels: np.ndarray, per_class: int, num_classes: int = 10) -> np.ndarray:
    """Sorted indices of the first ``per_class`` occurrences of every class in ``labels``."""
    chosen = []
    for k in range(num_classes):
        idx = np.flatnonzero(labels == k)
        if idx.size < per_class:
            raise ValueError(f"class {k} has only {idx.size} images, fewer than per_class={per_class}")
        chosen.append(idx[:per_class])
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def save_npz_reproducibly(path: Path, **arrays: np.ndarray) -> None:
    """Like :func:`numpy.savez_compressed`, but byte-for-byte reproducible.

    ``numpy.savez_compressed`` stamps every zip member with the current time, so the
    same arrays give a different file (and sha256) on every run.  Here each member gets
    the fixed zip epoch 1980-01-01 instead; the result is an ordinary ``.npz``.
    """
    buf = io.BytesIO()  # built in memory, then written atomically: an interrupt keeps the old file whole
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
    atomic_write(path, buf.getvalue())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


README = """# CIFAR-10 sample

A small, class-balanced, deterministic subset of the real CIFAR-10 data set, for tests,
CPU demos and quick runs of the book. It is **not** enough to reproduce Table 1 of the
FedNova paper, which uses all 50,000 training images (see `fedlib.data.cifar10.load_cifar10`).

| file | `{file}` |
|---|---|
| size | {size_bytes:,} bytes ({size_mb:.1f} MB) |
| sha256 | `{digest}` |
| training images | {n_train:,} ({train_pc} per class) |
| test images | {n_test:,} ({test_pc} per class) |

## Source

The CIFAR-10 "python version" batch files (`cifar-10-batches-py/`: `data_batch_1` …
`data_batch_5`, `test_batch`) of A. Krizhevsky, *Learning Multiple Layers of Features from
Tiny Images*, 2009 (https://www.cs.toronto.edu/~kriz/cifar.html). Pixels, labels and
image order are those of the original release; the copy used was `{source}`.

## Selection

No randomness. Training: the first {train_pc} images of each class (labels 0..9 =
{classes}) in the standard training order (batches 1 to 5 concatenated). Test: the first
{test_pc} images of each class in `test_batch` order. The selected images keep their
original relative order; `train_index` / `test_index` hold their positions in the full
training / test set.

## Contents (`numpy.load`)

- `train_images` uint8 ({n_train}, 32, 32, 3), NHWC, RGB; `train_labels` int64 ({n_train},)
- `test_images` uint8 ({n_test}, 32, 32, 3); `test_labels` int64 ({n_test},)
- `train_index` int64 ({n_train},), `test_index` int64 ({n_test},)

Load with `fedlib.data.cifar10.load_cifar10_sample()`.

## All labels: `{labels_file}`

{labels_size:,} bytes, sha256 `{labels_digest}`: `train_labels` uint8 (50000,) and
`test_labels` uint8 (10000,), every label of the full data set in the standard order. With
them the official Dir(0.1) split of the 50,000 training images is built without the
images: `fedlib.data.cifar10.cifar10_random_images()` pairs them with random pixels for
speed benchmarks (`python -m fedlib bench cifar10 --random-images`), whose work depends on
the split and the shapes, not on the pixels.

## Command

```
{command}
```
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                        help="folder containing cifar-10-batches-py/ (or that folder itself)")
    parser.add_argument("--download", action="store_true", help="download CIFAR-10 into --root if missing")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: data/cifar10-sample)")
    parser.add_argument("--train-per-class", type=int, default=200)
    parser.add_argument("--test-per-class", type=int, default=50)
    args = parser.parse_args(argv)
    if args.train_per_class < 1 or args.test_per_class < 1:
        parser.error("--train-per-class and --test-per-class must be >= 1")

    try:  # a missing or short data set is a bad input (exit 2, one line), not a traceback
        cifar = load_cifar10(args.root, download=args.download)
        train_index = first_per_class(cifar.train_labels, args.train_per_class)
        test_index = first_per_class(cifar.test_labels, args.test_per_class)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(f"--root {args.root}: {exc}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    file = out / FILE_NAME
    save_npz_reproducibly(
        file,
        train_images=cifar.train_images[train_index],
        train_labels=cifar.train_labels[train_index],
        test_images=cifar.test_images[test_index],
        test_labels=cifar.test_labels[test_index],
        train_index=train_index,
        test_index=test_index,
    )
    size = file.stat().st_size
    labels_file = out / LABELS_FILE_NAME
    save_npz_reproducibly(labels_file, train_labels=cifar.train_labels.astype(np.uint8),
                          test_labels=cifar.test_labels.astype(np.uint8))
    # the command that writes this sample again: the counts always (they were left out when they were
    # 400 and 100, not the defaults, so the README of a 400 + 100 sample named a 200 + 50 command)
    command = shlex.join(["python", "scripts/make_cifar_sample.py", "--root", str(args.root),
                          "--train-per-class", str(args.train_per_class), "--test-per-class", str(args.test_per_class)]
                         + ([] if Path(args.out).resolve() == DEFAULT_OUT.resolve() else ["--out", str(args.out)]))
    atomic_write(out / "README.md", README.format(
        file=FILE_NAME, size_bytes=size, size_mb=size / 1e6, digest=sha256(file),
        n_train=train_index.size, n_test=test_index.size,
        train_pc=args.train_per_class, test_pc=args.test_per_class,
        source=cifar.source, classes=", ".join(CIFAR10_CLASSES), command=command,
        labels_file=LABELS_FILE_NAME, labels_size=labels_file.stat().st_size, labels_digest=sha256(labels_file),
    ))
    print(f"wrote {file} ({size / 1e6:.1f} MB): {train_index.size} train, {test_index.size} test images")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
