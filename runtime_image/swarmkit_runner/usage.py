"""What each agent did with its skills during the run: the ``skills`` of the run result.

The disclosure tools (:mod:`.skills`) and the script tool (:mod:`.scripts`) record into one
:class:`SkillUsage` per run (shared with child runs, like the budget): skills loaded with
``load_skill`` (level 2), bundled files read with ``read_skill_file`` (level 3) and approved
scripts run with ``run_skill_script`` (with their exit status). :meth:`SkillUsage.report`
turns that into the result's per-agent facts; the result summarises them if the
termination message has no room (:meth:`swarmkit_api.bundle.RunResult.to_termination_message`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swarmkit_api.run import AgentSkillUsage, SkillFileRead, SkillScriptRuns


@dataclass
class _Script:
    runs: int = 0
    failures: int = 0
    last_exit_code: int | None = None


@dataclass
class _Agent:
    # dicts as ordered sets: the order of first use is kept
    loaded: dict[str, None] = field(default_factory=dict)
    files: dict[tuple[str, str], None] = field(default_factory=dict)
    scripts: dict[tuple[str, str], _Script] = field(default_factory=dict)


@dataclass
class SkillUsage:
    """Skill facts of one run, per agent, in the order agents first used a skill."""

    agents: dict[str, _Agent] = field(default_factory=dict)

    def _agent(self, name: str) -> _Agent:
        return self.agents.setdefault(name, _Agent())

    def loaded(self, agent: str, skill: str) -> None:
        self._agent(agent).loaded[skill] = None

    def file_read(self, agent: str, skill: str, path: str) -> None:
        self._agent(agent).files[(skill, path)] = None

    def script_run(self, agent: str, skill: str, path: str, exit_code: int | None) -> None:
        """A script ran; ``exit_code`` None means it was killed (timeout)."""
        script = self._agent(agent).scripts.setdefault((skill, path), _Script())
        script.runs += 1
        script.last_exit_code = exit_code
        if exit_code != 0:
            script.failures += 1

    def report(self) -> list[AgentSkillUsage]:
        out = []
        for name, agent in self.agents.items():
            scripts = [
                SkillScriptRuns(
                    skill=skill,
                    path=path,
                    runs=s.runs,
                    failures=s.failures,
                    last_exit_code=s.last_exit_code,
                )
                for (skill, path), s in agent.scripts.items()
            ]
            out.append(
                AgentSkillUsage(
                    agent=name,
                    loaded=list(agent.loaded),
                    loads=len(agent.loaded),
                    files_read=[SkillFileRead(skill=s, path=p) for s, p in agent.files],
                    file_reads=len(agent.files),
                    scripts=scripts,
                    script_runs=sum(s.runs for s in scripts),
                    script_failures=sum(s.failures for s in scripts),
                )
            )
        return out
