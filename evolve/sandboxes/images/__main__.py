"""`python -m evolve.sandboxes.images [--force | --tag]`: build the sandbox image, or print
its tag."""

from __future__ import annotations

import argparse

from evolve.sandboxes.images.build import build_image, image_tag


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m evolve.sandboxes.images", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    group.add_argument("--tag", action="store_true", help="print the recipe's tag and exit")
    args = parser.parse_args()
    print(image_tag() if args.tag else build_image(force=args.force))


if __name__ == "__main__":
    main()
