"""``mindroom run``, ``chat`` and ``doctor``: the agents, a terminal to talk to them, and the
checks of an install."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import shlex
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mindroom.app.runlock import hold_run_lock, release_run_lock, require_running
from mindroom.cli.options import DEFAULT_CONFIG, Args, Invocation, invocation, with_storage
from mindroom.errors import ConfigError
from mindroom.invocation import invoked_as

if TYPE_CHECKING:
    from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
    from mindroom.config import Config

logger = logging.getLogger("mindroom")

DEFAULT_LOCAL_PORT = 8008


def _paths(args: Args) -> tuple[Path, Path]:
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    return config_path, storage


async def _run(args: Args) -> int:
    """Run until Ctrl-C or SIGTERM, which stop it at any point: during login, the first sync,
    a retry's wait, or while running."""
    main = asyncio.current_task()
    assert main is not None
    signalled = asyncio.Event()

    def on_signal() -> None:
        if not signalled.is_set():  # one cancel: the clean-up after it must not be cut short
            signalled.set()
            logger.info("stopping")
            main.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGUSR1, log_tasks)  # what is it waiting for?
    try:
        await _serve(args)
    except asyncio.CancelledError:
        if not signalled.is_set():
            raise
        main.uncancel()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            loop.remove_signal_handler(sig)
    return 0


def log_tasks() -> None:
    """Log where every task of the running bot waits (``kill -USR1 <pid>``)."""
    tasks = asyncio.all_tasks()
    logger.warning("%d tasks (kill -USR1):", len(tasks))
    for task in sorted(tasks, key=lambda t: t.get_name()):
        frames = task.get_stack()
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        logger.warning("  %s: %s", task.get_name(), where or "not started")


def same_storage_command(args: Args, *words: str) -> str:
    """``mindroom WORDS`` as the person can paste it, for the config and storage of ``args``
    (--config and --storage repeated when they are not the defaults)."""
    parts = [invoked_as(), *words]
    if args.config != DEFAULT_CONFIG:
        parts += ["--config", shlex.quote(args.config)]
    if args.storage:
        parts += ["--storage", shlex.quote(args.storage)]
    return " ".join(parts)


def chat_command(args: Args) -> str:
    """The ``chat`` command that reaches this run (it finds the local account in the storage)."""
    return same_storage_command(args, "chat")


def running_banner(config: Config, agents: list[str], dashboard: str | None = None) -> str:
    """What runs where: each room with its agents, the agents in no room (DM them), and the
    dashboard's address (None: not served)."""
    rooms: dict[str, list[str]] = {}
    roomless = []
    for name in agents:
        listed = config.agents[name].rooms if name in config.agents else []
        for room in listed:
            rooms.setdefault(room, []).append(name)
        if not listed:
            roomless.append(name)
    parts = [f"{', '.join(names)} in #{room}" for room, names in rooms.items()]
    if roomless:
        parts.append(f"{', '.join(roomless)} in no room (invite to a DM, or add rooms:)")
    where = f" Dashboard: {dashboard}." if dashboard else ""
    return f"mindroom is running: {'; '.join(parts) or 'no agents'}.{where} Ctrl-C stops."


async def _serve(args: Args) -> None:
    """Start everything and run until cancelled; the exit stack closes what was started.

    The config is read and the run lock taken before anything heavy is imported, so that a
    config error or a second run on the same storage is reported in a fraction of a second
    rather than after seconds of imports; with ``--local`` the homeserver is launched next, so
    that it starts up in its own process while this one imports the bot's modules (seconds of
    CPU each, on two cores at once). On a restart of ``--local`` (the homeserver's config is
    there) it is launched even before the config is read: its boot is the longest step."""
    config_path, storage = _paths(args)
    data_dir = storage / "mindroom_data"
    async with contextlib.AsyncExitStack() as stack:
        early = await _launch_early(args, data_dir, stack)  # a restart of --local
        # The config and the bot's modules make a few hundred thousand objects that live as
        # long as the process: the cyclic collector's passes over them while they are made
        # are a tenth of the imports' CPU, for nothing. Off until they are made, then frozen
        # (never scanned again); on again at the end in any case.
        gc.disable()
        stack.callback(gc.enable)
        from mindroom.config import load_config

        config = load_config(config_path)  # a mistake stops that homeserver, still importing
        homeserver_url = os.environ.get("MATRIX_HOMESERVER") or config.matrix.homeserver
        shared_secret = os.environ.get("MATRIX_REGISTRATION_SHARED_SECRET") or None
        invite: tuple[str, ...] = ()
        pins = agent_pins(args.agents, config, local=args.local)
        sharing = shares_agents(config, local=args.local)
        homeserver = await _settle_homeserver(args, config, data_dir, stack, early, sharing)
        # Blocking the loop while the homeserver boots is fine: nothing else runs on it yet.
        # The bot's start-up checks (the models' endpoints, loading a local embedder: seconds of
        # CPU in threads) begin once its accounts run (Bot.start), not now: on two cores they
        # would take the CPU and the interpreter from the imports and logins before the banner.
        from mindroom.app.bot import Bot, BotOptions

        dashboard_wanted = config.dashboard.enabled and not args.no_dashboard
        if dashboard_wanted:
            from mindroom.dashboard.server import Dashboard
        gc.freeze()
        gc.enable()
        if homeserver is not None:
            from mindroom.adapters.matrix.local import ensure_local_user, follow_port_change

            await homeserver.wait_ready()
            homeserver_url, shared_secret = homeserver.url, homeserver.shared_secret
            follow_port_change(data_dir, homeserver.previous_url, homeserver_url)
            user = await ensure_local_user(data_dir, homeserver_url, shared_secret, args.user)
            invite = (user.user_id,)
            print(
                "\nLocal homeserver is up. Log in with any Matrix client:\n"
                f"  homeserver: {user.homeserver}\n"
                f"  user:       {user.user_id}\n"
                f"  password:   {user.password}\n"
                f"or talk from this machine: {chat_command(args)} 'hello'\n"
            )
        bot = Bot(
            config,
            BotOptions(
                storage,
                homeserver_url,
                shared_secret,
                invite_users=invite,
                config_dir=config_path.parent,
                config_path=config_path,
                pins=pins,
                leases=sharing,
            ),
        )
        stack.push_async_callback(bot.stop)
        ops_port = args.ops_port or config.ops.port
        if ops_port:  # before the start: /healthz says "starting" until the accounts run
            from mindroom.dashboard.ops import OpsServer

            ops = OpsServer(bot, data_dir, config.ops.host, ops_port)
            if await ops.start():
                stack.push_async_callback(ops.stop)
        await bot.start()
        url = None
        if dashboard_wanted:  # up before "running" is said
            port = args.dashboard_port or config.dashboard.port
            dashboard = Dashboard(bot, config_path, data_dir, port)
            if await dashboard.start():  # on the next free port when this one is taken
                stack.push_async_callback(dashboard.stop)
                url = dashboard.url
                if dashboard.port != port:
                    print(f"Port {port} is taken; the dashboard is on {dashboard.port}.")
                print(f"Dashboard: {url}")
        print(running_banner(config, list(bot.agents), url))
        await asyncio.Event().wait()  # until a signal cancels this task


async def _launch_early(
    args: Args, data_dir: Path, stack: contextlib.AsyncExitStack
) -> EmbeddedHomeserver | None:
    """On a restart of ``--local`` (its homeserver's config is there): take the run lock and
    launch the homeserver before the config is read, as its boot is the longest step of the
    start; its room version is checked once the config is read (:func:`_settle_homeserver`).
    None otherwise: nothing done."""
    if not (args.local and _homeserver_configured(data_dir)):
        return None
    # First, before anything touches the storage; held until the process ends. Its short
    # blocking wait is fine here: nothing else runs on the loop yet. (--local is never shared.)
    stack.callback(release_run_lock, hold_run_lock(data_dir, shared=False))
    return await _launch_homeserver(args, None, data_dir, stack)


async def _settle_homeserver(
    args: Args,
    config: Config,
    data_dir: Path,
    stack: contextlib.AsyncExitStack,
    early: EmbeddedHomeserver | None,
    sharing: bool,
) -> EmbeddedHomeserver | None:
    """With the config read: the run lock taken (unless :func:`_launch_early` took it) and,
    with ``--local``, the homeserver launched with the config's room version (the early one
    relaunched when that version changed since the last run)."""
    if early is None:
        stack.callback(release_run_lock, hold_run_lock(data_dir, shared=sharing))
        if not args.local:
            return None
        return await _launch_homeserver(args, config.matrix.room_version, data_dir, stack)
    if early.room_version == config.matrix.room_version:
        return early
    await early.stop()
    homeserver = await _launch_homeserver(args, config.matrix.room_version, data_dir, stack)
    # the accounts are saved under the address from before the early launch (--port 0 picks
    # a new port at each launch)
    homeserver.previous_url = early.previous_url or early.url
    return homeserver


def _homeserver_dir(data_dir: Path) -> Path:
    return data_dir / "homeserver"


def _homeserver_configured(data_dir: Path) -> bool:
    """Whether the embedded homeserver ran on this storage before (its config is there)."""
    from mindroom.adapters.matrix.homeserver import CONFIG_FILE

    return (_homeserver_dir(data_dir) / CONFIG_FILE).exists()


async def _launch_homeserver(
    args: Args, room_version: str | None, data_dir: Path, stack: contextlib.AsyncExitStack
) -> EmbeddedHomeserver:
    """The embedded homeserver of ``--local``, launched (not yet answering) and stopped by
    ``stack``; ``room_version`` None keeps the one its config has."""
    from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver

    homeserver = EmbeddedHomeserver(
        _homeserver_dir(data_dir), port=args.port, room_version=room_version
    )
    print(f"Starting the local homeserver in {homeserver.data_dir} ...")
    stack.push_async_callback(homeserver.stop)
    await homeserver.launch()
    return homeserver


def shares_agents(config: Config, *, local: bool) -> bool:
    """True when several ``mindroom run`` may share this config's agents (leases)."""
    return bool(config.storage.database) and not local


def agent_pins(given: str | None, config: Config, *, local: bool) -> tuple[str, ...]:
    """The accounts ``--agents a,b`` pins this process to (ConfigError when it cannot)."""
    if not given:
        return ()
    if not shares_agents(config, local=local):
        raise ConfigError(
            "--agents shares the agents between several processes: it needs storage.database "
            "(PostgreSQL) and an external homeserver (not --local)"
        )
    names = tuple(dict.fromkeys(n.strip() for n in given.split(",") if n.strip()))
    known = [*config.agents, *config.teams]  # the router goes to whoever takes it first
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(
            f"--agents: no agent or team named {', '.join(unknown) or repr(given)} in the config "
            f"(known: {', '.join(known)})"
        )
    return names


async def _doctor(args: Args) -> int:
    from mindroom.cli.doctor import render, run_doctor

    config_path, storage = _paths(args)
    checks = await run_doctor(config_path, storage, os.environ.get("MATRIX_HOMESERVER"))
    print(render(checks))
    return 0 if all(c.ok for c in checks) else 1


async def _chat(args: Args) -> int:
    from mindroom.adapters.matrix.chat import chat

    _, storage = _paths(args)
    data_dir = storage / "mindroom_data"
    message = " ".join(args.message) if args.message else None
    check = functools.partial(require_running, data_dir, _start_command(args))
    if not args.verbose:  # nio's retry warnings when the homeserver goes away are noise here
        logging.getLogger("nio").setLevel(logging.ERROR)
    return await chat(
        data_dir,
        args.room,
        message,
        timeout=args.timeout,
        bot_check=check,
        start_command=_start_command(args),
    )


def _start_command(args: Args) -> str:
    """The ``run`` command for the storage this chat uses (chat logs in as the user
    ``run --local`` made, so that is the run it needs)."""
    return same_storage_command(args, "run", "--local")


@with_storage
@click.command("run", help="run the agents")
@click.option("--local", is_flag=True, help="start an embedded local homeserver")
@click.option(
    "--port",
    type=int,
    default=None,
    help=f"local homeserver port ({DEFAULT_LOCAL_PORT} at first; later runs keep the last one)",
)
@click.option("--user", default="user", help="local human account name (user)")
@click.option(
    "--dashboard-port", type=int, default=None, help="dashboard port (dashboard.port: 8765)"
)
@click.option("--no-dashboard", is_flag=True, help="do not serve the dashboard")
@click.option("--ops-port", type=int, default=None, help="serve /healthz and /metrics")
@click.option(
    "--agents",
    default=None,
    metavar="A,B",
    help="with storage.database: the agents this process is home to (others run them "
    "only while it is down)",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="json: one JSON object per log line (MINDROOM_LOG_FORMAT)",
)
def run(**_: object) -> Invocation:
    """``mindroom run``."""
    return invocation(_run)


@with_storage
@click.command(
    "chat",
    help="talk to the agents from the terminal (local user)\n\n"
    "MESSAGE: the message to send; none opens a prompt",
)
@click.option("--room", default="lobby", help="room name or alias (lobby)")
@click.option("--timeout", type=float, default=60.0, help="seconds to wait for an answer (60)")
@click.argument("message", nargs=-1)
def chat(**_: object) -> Invocation:
    """``mindroom chat``."""
    return invocation(_chat)


@with_storage
@click.command("doctor", help="check config, homeserver, models, storage, encrypted rooms")
def doctor(**_: object) -> Invocation:
    """``mindroom doctor``."""
    return invocation(_doctor)
