"""{{name}}: an a2a-edge agent (a2a-edge's docs/agents.md)."""

import wit_world
from componentize_py_types import Err
from wit_world.imports import a2a_agent_types as types
from wit_world.imports import progress


class WitWorld(wit_world.WitWorld):
    def run(self, turn: types.Turn) -> types.Outcome:
        try:
            progress.status("thinking")
            progress.text(f"{{name}} heard: {turn.text}")
            return types.Outcome_Completed()
        except Err as e:
            return types.Outcome_Failed(str(e.value))
