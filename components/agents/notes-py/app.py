"""A note-taking agent in Python (componentize-py): it keeps each context's notes in the
instance's key-value bucket, says what it does through `progress`, and answers with the granted
model when there is one (streamed to the caller), else with the note's number. "ask" asks for
the note first (INPUT_REQUIRED); the next message on that task is the note.

Build (here): pip install -r requirements.txt &&
    componentize-py -d ../../../wit/agent -w agent componentize app -o notes-py.wasm
"""

import wit_world
from componentize_py_types import Err
from wit_world.imports import a2a_agent_types as types
from wit_world.imports import llm, progress
from wit_world.imports import wasi_keyvalue_store as keyvalue


def answer(notes: str, text: str, count: int) -> None:
    """Asks the model about the note, or says its number when no model is granted."""
    request = llm.Request(
        messages=[
            llm.Message(llm.Role.SYSTEM, "Notes so far:\n" + notes, [], None),
            llm.Message(llm.Role.USER, text, [], None),
        ],
        tools=[],
        max_tokens=None,
        temperature=None,
        stream_answer=True,
    )
    try:
        llm.complete(request)
    except Err as e:
        if not isinstance(e.value, llm.Error_NotGranted):
            raise
        progress.text(f"noted {count}: {text}")


class WitWorld(wit_world.WitWorld):
    def run(self, turn: types.Turn) -> types.Outcome:
        try:
            progress.status("taking a note")
            bucket = keyvalue.open("notes")
            text = turn.text.strip()
            if text == "ask" and not bucket.exists(turn.task_id):
                bucket.set(turn.task_id, b"asked")
                return types.Outcome_InputRequired("What should I note?")
            notes = (bucket.get(turn.context_id) or b"").decode() + text + "\n"
            bucket.set(turn.context_id, notes.encode())
            answer(notes, text, notes.count("\n"))
            return types.Outcome_Completed()
        except Err as e:
            return types.Outcome_Failed(f"the note was not taken: {e.value}")
