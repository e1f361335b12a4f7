"""Entry point: ``python -m router`` and the ``hopd`` console script."""

from router.cli import hopd


def main() -> None:
    hopd()


if __name__ == "__main__":
    main()
