"""One module per ``kubectl swarmkit`` subcommand, each exposing ``register(subparsers)``.

To add a subcommand, drop a module here::

    from ..plugin import EXIT_OK, add_command

    def register(subparsers):
        p = add_command(subparsers, "hello", run, help="say hello")
        p.add_argument("--name", default="world")

    def run(args, console):
        console.print(f"hello {args.name}")
        return EXIT_OK

It is discovered by name (no list to edit). Modules whose name starts with ``_`` are
helpers, not commands.
"""
