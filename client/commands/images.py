"""`svc images build|list`: the stock sandbox images, built locally from Debian packages
(`daemon.sandbox.images`; needs the docker CLI and mmdebstrap, not the daemon)."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    images = sub.add_parser("images", help="stock sandbox images (localhost/svc/...)")
    actions = images.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build missing or outdated stock images")
    build.add_argument("images", nargs="*", metavar="IMAGE", help="images to build (default: all)")
    build.add_argument("--force", action="store_true", help="rebuild even when present (re-runs mmdebstrap)")
    build.add_argument("--jobs", "-j", type=int, help="parallel builds (default 3)")
    build.set_defaults(func=build_images, needs_daemon=False)
    ls = actions.add_parser("list", help="stock images and whether they are current")
    ls.set_defaults(func=list_images, needs_daemon=False)


async def build_images(args, client) -> int:
    import asyncio

    from daemon.sandbox import images

    argv = ["build", *args.images]
    if args.force:
        argv.append("--force")
    if args.jobs:
        argv += ["--jobs", str(args.jobs)]
    return await asyncio.to_thread(images.main, argv)


async def list_images(args, client) -> int:
    import asyncio

    from daemon.sandbox import images

    return await asyncio.to_thread(images.main, ["list"])
