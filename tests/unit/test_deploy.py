"""The deployment example (``deploy/``): its config is valid, its processes' commands
parse and pin agents the config names, and the two processes share one storage volume and one
database. (No Docker engine runs here: ``tests/integration/test_cluster.py`` runs the same set-up
as local processes.)"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from mindroom.cli.main import parse_args
from mindroom.cli.run import agent_pins
from mindroom.config.load import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_compose_example_runs_two_processes_sharing_the_agents() -> None:
    compose = YAML(typ="safe").load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "synapse", "mindroom-a", "mindroom-b"} <= set(services)
    env = {"MINDROOM_DATABASE_URL": services["mindroom-a"]["environment"]["MINDROOM_DATABASE_URL"]}
    config = parse_config((DEPLOY / "config.yaml").read_text(), "deploy/config.yaml", env)
    assert config.storage.database == env["MINDROOM_DATABASE_URL"]
    assert config.storage.database.startswith("postgresql://mindroom:")

    pinned: list[str] = []
    for name in ("mindroom-a", "mindroom-b"):
        service = services[name]
        args = parse_args(service["command"])
        assert args.command == "run"
        assert args.config == "/etc/mindroom/config.yaml"
        pinned += agent_pins(args.agents, config, local=args.local)
        assert "storage:/storage" in service["volumes"]  # one volume: failover for every agent
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert sorted(pinned) == sorted(config.agents)  # every agent has a home, none two
