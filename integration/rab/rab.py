"""RAB, the Resilient-write Agent Benchmark of the paper (arXiv 2604.10842): the six
scenarios S0–S5 (tasks.py), run by an agent against an MCP server, judged (judge.py: completion
40, tool selection 25, error recovery 25, efficiency 10; pass >= 70), Pass@1 over N trials.

    python rab.py run --server rwfs=target/debug/rwfs --server reference=.../bin/resilient-write
    python rab.py run --server rwfs=rwfs --agent 'claude -p --allowedTools mcp__rab --mcp-config {mcp_config}'
    python rab.py judge OUT/rwfs/S1/trial-1

Servers: `rwfs=BINARY` runs `BINARY mcp -w WORKSPACE`; `reference=BINARY` runs the reference
server (resilient-write) with RW_WORKSPACE and RW_STATE_DIR set to the workspace.

Agents: without --agent, the scripted reference strategy (strategy.py) plays the agent. With
--agent CMD, CMD runs once per agent session (S4: twice) through `sh -c`, in the trial's
workspace, after these are replaced in it: {prompt} (the spec, shell-quoted), {prompt_file},
{mcp_config} (a file `{"mcpServers": {"rab": {...}}}` that starts the server behind the
harness's proxy) and {workspace}. The prompt goes to its stdin when CMD names neither {prompt}
nor {prompt_file}; what CMD prints on stdout is its final answer. It also gets RAB_SERVER,
RAB_SCENARIO, RAB_LABEL, RAB_WORKSPACE, RAB_TRANSCRIPT, RAB_MCP_CONFIG and RAB_PROMPT_FILE in its
environment (`rab.py play` is the scripted strategy as such a command). Either way every tool
call goes through proxy.py, which records the transcript and makes the scenario's failure happen.

Each trial leaves OUT/<server>/<scenario>/trial-<n>/: ws/ (the workspace, with the server's
journal), transcript.jsonl, answer.md, facts.json, judge.json. Results go to stdout as a table
and, with --json FILE, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "mcp"))

from mcp import StdioServerParameters  # noqa: E402
from rwmcp import Failed, connect, reference_server, rwfs_server  # noqa: E402

import judge  # noqa: E402
import tasks  # noqa: E402
from strategy import STRATEGIES, Agent, GaveUp  # noqa: E402

PROXY = HERE / "proxy.py"


class Server:
    def __init__(self, spec: str):
        name, _, binary = spec.partition("=")
        if name not in ("rwfs", "reference") or not binary:
            raise SystemExit(f"--server {spec!r}: expected rwfs=BINARY or reference=BINARY")
        found = binary if os.sep in binary else shutil.which(binary)  # a bare name: from PATH
        if not found:
            raise SystemExit(f"--server {spec!r}: {binary} is not on PATH")
        self.name, self.binary = name, str(Path(found).resolve())
        self.dotted = name == "reference"  # its tool names are rw.safe_write

    def params(self, workspace: Path) -> StdioServerParameters:
        if self.name == "rwfs":
            return rwfs_server(self.binary, str(workspace))
        return reference_server(self.binary, str(workspace))

    def proxied(self, workspace: Path, transcript: Path, scenario: str, label: str) -> StdioServerParameters:
        """The server behind the harness's proxy."""
        inner = self.params(workspace)
        args = [str(PROXY), "--transcript", str(transcript), "--scenario", scenario, "--workspace", str(workspace),
                "--label", label, "--", inner.command, *inner.args]
        return StdioServerParameters(command=sys.executable, args=args, env=inner.env, cwd=inner.cwd)


async def play(params: StdioServerParameters, dotted: bool, scenario: str, label: str, ws: Path, transcript: Path) -> str:
    """The scripted strategy's part for session `label` as the agent; its final answer."""
    part = STRATEGIES[scenario][[p.label for p in tasks.prompts(scenario, dotted)].index(label)]
    async with connect(params, name=label, dotted=dotted, mode="legacy" if dotted else "auto") as session:
        agent = Agent(session, await session.tools(), ws, transcript, label)
        try:
            return await part(agent)
        except (GaveUp, Failed) as why:
            return f"(gave up: {why})\n"


async def scripted(server: Server, scenario: str, trial_dir: Path) -> str:
    """The scripted strategy as the agent, one session per part; its final answer."""
    ws, transcript = trial_dir / "ws", trial_dir / "transcript.jsonl"
    answer = []
    for prompt in tasks.prompts(scenario, server.dotted):
        params = server.proxied(ws, transcript, scenario, prompt.label)
        answer.append(await play(params, server.dotted, scenario, prompt.label, ws, transcript))
        if answer[-1].startswith("(gave up"):
            break
    return "".join(answer)


def with_agent(server: Server, scenario: str, trial_dir: Path, command: str, timeout: float) -> str:
    """`command` as the agent, once per session; what it printed."""
    ws, transcript = trial_dir / "ws", trial_dir / "transcript.jsonl"
    answer = []
    for prompt in tasks.prompts(scenario, server.dotted):
        params = server.proxied(ws, transcript, scenario, prompt.label)
        config = {"command": params.command, "args": params.args}
        if server.name == "reference":
            config["env"] = {k: v for k, v in (params.env or {}).items() if k.startswith("RW_")}
        mcp_config = trial_dir / f"mcp-{prompt.label}.json"
        mcp_config.write_text(json.dumps({"mcpServers": {"rab": config}}, indent=1))
        prompt_file = trial_dir / f"prompt-{prompt.label}.md"
        prompt_file.write_text(prompt.text)
        line = (command.replace("{prompt}", shlex.quote(prompt.text)).replace("{prompt_file}", shlex.quote(str(prompt_file)))
                .replace("{mcp_config}", shlex.quote(str(mcp_config))).replace("{workspace}", shlex.quote(str(ws))))
        piped = "{prompt}" not in command and "{prompt_file}" not in command
        env = dict(os.environ, RAB_SERVER=server.name, RAB_SCENARIO=scenario, RAB_LABEL=prompt.label,
                   RAB_WORKSPACE=str(ws), RAB_TRANSCRIPT=str(transcript), RAB_MCP_CONFIG=str(mcp_config),
                   RAB_PROMPT_FILE=str(prompt_file))
        try:
            done = subprocess.run(["sh", "-c", line], cwd=ws, input=prompt.text if piped else "", text=True,
                                  stdout=subprocess.PIPE, timeout=timeout, env=env)
            answer.append(done.stdout)
            if done.returncode != 0:
                answer.append(f"\n(agent exited with {done.returncode})\n")
        except subprocess.TimeoutExpired as late:
            answer.append(f"{late.stdout or ''}\n(agent timed out after {timeout} s)\n")
    return "".join(answer)


def run_trial(server: Server, scenario: str, trial: int, out: Path, agent: str | None, timeout: float) -> dict[str, Any]:
    trial_dir = out / server.name / scenario / f"trial-{trial}"
    if trial_dir.exists():
        shutil.rmtree(trial_dir)
    trial_dir.mkdir(parents=True)
    (trial_dir / "trial.json").write_text(json.dumps({"server": server.name, "scenario": scenario, "trial": trial}))
    tasks.save(trial_dir / "facts.json", tasks.setup(scenario, trial_dir / "ws", trial))
    if agent:
        answer = with_agent(server, scenario, trial_dir, agent, timeout)
    else:
        answer = asyncio.run(asyncio.wait_for(scripted(server, scenario, trial_dir), timeout))
    (trial_dir / "answer.md").write_text(answer)
    verdict = judge.judge(scenario, trial_dir)
    (trial_dir / "judge.json").write_text(json.dumps(verdict, indent=1))
    return verdict


def table(results: dict[str, dict[str, list[dict[str, Any]]]], scenarios: list[str]) -> str:
    servers = list(results)
    head = ["scenario"] + [f"{name}: scores, Pass@1" for name in servers]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for scenario in scenarios:
        cells = [scenario]
        for name in servers:
            trials = results[name][scenario]
            scores = " ".join(str(t["score"]) for t in trials)
            cells.append(f"{scores}, {pass_at_1(trials):.2f}")
        lines.append(" | ".join(cells))
    overall = ["overall"] + [f"{pass_at_1([t for ts in results[n].values() for t in ts]):.2f}" for n in servers]
    lines.append(" | ".join(overall))
    return "\n".join(lines)


def pass_at_1(trials: list[dict[str, Any]]) -> float:
    """The share of trials that passed: Pass@1 estimated from n samples (Chen et al., k = 1)."""
    return sum(t["passed"] for t in trials) / len(trials) if trials else 0.0


def cmd_run(args: argparse.Namespace) -> None:
    servers = [Server(s) for s in args.server]
    scenarios = args.scenario or tasks.SCENARIOS
    out = Path(args.out or tempfile.mkdtemp(prefix="rab-")).resolve()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {s.name: {} for s in servers}
    for scenario in scenarios:
        for server in servers:
            trials = []
            for n in range(1, args.trials + 1):
                verdict = run_trial(server, scenario, n, out, args.agent, args.timeout)
                c = verdict["components"]
                print(f"{server.name} {scenario} trial {n}: {verdict['score']} "
                      f"({'pass' if verdict['passed'] else 'FAIL'}; completion {c['completion']}, tool selection "
                      f"{c['tool_selection']}, error recovery {c['error_recovery']}, efficiency {c['efficiency']})", flush=True)
                if args.verbose or not verdict["passed"]:
                    for note in verdict["notes"]:
                        print(f"    {note}", flush=True)
                trials.append(verdict)
            results[server.name][scenario] = trials
    print()
    print(table(results, scenarios))
    print(f"\ntrials kept in {out}")
    if args.json:
        summary = {name: {sc: {"pass_at_1": pass_at_1(ts), "trials": ts} for sc, ts in per.items()} for name, per in results.items()}
        Path(args.json).write_text(json.dumps(summary, indent=1))


def cmd_play(args: argparse.Namespace) -> None:
    """The scripted strategy as an agent command: it reads the MCP config the harness wrote and
    the RAB_* variables it sets, and prints its final answer."""
    env = os.environ
    config = json.loads(Path(env["RAB_MCP_CONFIG"]).read_text())["mcpServers"]["rab"]
    params = StdioServerParameters(command=config["command"], args=config["args"], env={**env, **config.get("env", {})})
    dotted = env["RAB_SERVER"] == "reference"
    ws, transcript = Path(env["RAB_WORKSPACE"]), Path(env["RAB_TRANSCRIPT"])
    print(asyncio.run(play(params, dotted, env["RAB_SCENARIO"], env["RAB_LABEL"], ws, transcript)), end="")


def cmd_judge(args: argparse.Namespace) -> None:
    trial_dir = Path(args.trial)
    scenario = json.loads((trial_dir / "trial.json").read_text())["scenario"]
    print(json.dumps(judge.judge(scenario, trial_dir), indent=1))


def main() -> None:
    head, _, rest = __doc__.partition("\n\n")
    p = argparse.ArgumentParser(description=head, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenarios against servers and judge them")
    run.add_argument("--server", action="append", required=True, help="rwfs=BINARY or reference=BINARY (repeatable)")
    run.add_argument("--scenario", action="append", choices=tasks.SCENARIOS, help="only these (repeatable; default all)")
    run.add_argument("--trials", type=int, default=3, help="trials per scenario and server (default 3)")
    run.add_argument("--agent", help="an agent command instead of the scripted strategy (see above)")
    run.add_argument("--timeout", type=float, default=900, help="seconds per agent session (default 900)")
    run.add_argument("--out", help="where trials are kept (default: a new temporary directory)")
    run.add_argument("--json", help="write the results as JSON to this file")
    run.add_argument("-v", "--verbose", action="store_true", help="print every judge note, not only a failed trial's")
    run.set_defaults(func=cmd_run)
    scripted_agent = sub.add_parser("play", help="the scripted strategy as an --agent command (reads RAB_* variables)")
    scripted_agent.set_defaults(func=cmd_play)
    again = sub.add_parser("judge", help="judge a kept trial again")
    again.add_argument("trial", help="OUT/<server>/<scenario>/trial-<n>")
    again.set_defaults(func=cmd_judge)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
