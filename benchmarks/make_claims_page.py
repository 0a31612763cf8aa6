"""Development script: write docs/reproductions.md from the claims files in docs/claims/.

    python benchmarks/make_claims_page.py                      # docs/reproductions.md
    python benchmarks/make_claims_page.py --readme README.md   # also README's summary block
    python benchmarks/make_claims_page.py --claims-dir DIR --out page.md

Each claims file ``PAPER-SCALE.json`` is written by a reproduction (``fedbandit reproduce PAPER
--claims FILE``, docs/reproductions.md); the page lists them in paper order, CI scale first, after
docs/claims/intro.md. Writes ``--out`` and, with ``--readme``, that README's summary block
between the markers of :data:`fedbandit_env.bench.claims.SUMMARY_START`; nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedbandit_env.bench.claims import render_page, replace_summary, summary_lines

ROOT = Path(__file__).resolve().parents[1]
CLAIMS_DIR = ROOT / "docs" / "claims"
PAGE = ROOT / "docs" / "reproductions.md"
README = ROOT / "README.md"
PAGE_ORDER = ("gossip", "dp-recsys", "commeff", "linear", "field", "byzres", "fed-mom", "vial",
              "async")


def paper_scales(folder: Path) -> dict[str, str]:
    """The papers' own scales (``paper-scales.tsv`` of the claims folder: slug, tab, text;
    ``#`` lines are comments); empty when the file is missing."""
    path = folder / "paper-scales.tsv"
    if not path.exists():
        return {}
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("\t", 1) for line in lines)


def claims_files(folder: Path) -> list[Path]:
    """The claims files of ``folder`` in page order: paper (:data:`PAGE_ORDER`), CI first."""

    def key(path: Path) -> tuple[int, int, str]:
        paper, _, scale = path.stem.rpartition("-")
        rank = PAGE_ORDER.index(paper) if paper in PAGE_ORDER else len(PAGE_ORDER)
        return (rank, 0 if scale == "ci" else 1, path.stem)

    return sorted(folder.glob("*.json"), key=key)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--claims-dir",
        type=Path,
        default=CLAIMS_DIR,
        help="folder of claims files PAPER-SCALE.json (default: %(default)s)",
    )
    p.add_argument("--out", type=Path, default=PAGE, help="page to write (default: %(default)s)")
    p.add_argument(
        "--readme",
        type=Path,
        default=None,
        help="also refresh the reproductions summary block of this README (default: none)",
    )
    opts = p.parse_args(argv)
    files = claims_files(opts.claims_dir)
    if not files:
        sys.exit(f"make_claims_page: no claims file (*.json) in {opts.claims_dir}")
    intro_path = opts.claims_dir / "intro.md"
    intro = intro_path.read_text() if intro_path.exists() else ""
    scales = paper_scales(opts.claims_dir)
    opts.out.write_text(render_page(files, intro=intro, paper_scales=scales))
    print(f"make_claims_page: {opts.out} from {len(files)} claims file(s)")
    if opts.readme is not None:
        opts.readme.write_text(replace_summary(opts.readme.read_text(), summary_lines(files)))
        print(f"make_claims_page: the reproductions summary of {opts.readme}")


if __name__ == "__main__":
    main()
