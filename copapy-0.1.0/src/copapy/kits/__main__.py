"""``python -m copapy.kits paths``: where libcopapy and its headers are (for a C/C++ build)."""

from __future__ import annotations

import argparse
import sys

from .paths import include_dir, kit_include_dir, library_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m copapy.kits", description=__doc__)
    parser.add_argument("what", choices=["paths", "library", "include", "cflags", "libs"],
                        nargs="?", default="paths")
    args = parser.parse_args(argv)
    lib = library_path()
    if args.what == "library":
        print(lib)
    elif args.what == "include":
        print(include_dir())
    elif args.what == "cflags":
        print(f"-I{include_dir()}")
    elif args.what == "libs":
        print(f"{lib} -Wl,-rpath,{lib.parent}")
    else:
        print(f"library      {lib}")
        print(f"include      {include_dir()}")
        print(f"kit include  {kit_include_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
