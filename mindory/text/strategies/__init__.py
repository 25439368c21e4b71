"""Structure-aware chunking strategies with the same exactness as ``window``.

Every strategy is a pure function of a section's normalized text and render
blocks that returns normalized ``[start, end)`` spans; ``chunking.make_chunks``
turns them into chunks with source and UTF-16 spans through the offset map,
exactly as for ``window``. The rules (docs/chunking.md has the long form):

* **Units.** The blocks *tile* the text: block ``k`` owns ``[start_k,
  start_{k+1})``, so every character belongs to exactly one unit and no text
  can be dropped. Unit edges are trimmed of whitespace (``windows``' set) and
  never fall inside a grapheme cluster. *Atomic* units are never split: a
  ``preformatted`` block, a run of consecutive ``table_row`` blocks (one table),
  and a code fence (a line starting with three backticks up to the next three
  backticks, extended to whole blocks; an unclosed fence is ordinary text).
* **Cutting a long unit** (``_Cutter.cut``): the last sentence end (Latin
  ``.!?`` with closing quotes, followed by whitespace; ``。！？；…．`` with
  closing quotes) in the last two thirds of the room, else the last clause end
  (``,;:`` followed by whitespace, ``，、：``, or a line break) in the last half,
  else the last space in the last half, else the same three anywhere, else a
  hard cut at the size that never splits a grapheme cluster.
* ``paragraph``: one block per chunk. A block shorter than ``min_size``, and a
  heading, joins the next block (at the end of a section, the previous
  chunk); a block longer than ``size`` is cut as above and a cut-off tail
  shorter than ``min_size`` joins the piece before it.
* ``structured``: consecutive units are packed greedily up to ``size``; a
  heading never ends a chunk while text follows it (the heading moves to the
  next chunk with the text it introduces); a unit too long for the chunk first
  fills the chunk with its leading sentences, then continues in new chunks.
  A last chunk shorter than ``min_size`` joins the one before it.
* ``parent-child``: ``structured`` parents of ``max(parent_size, size)``
  characters, each packed again into ``structured`` children of ``size``
  inside it; children are the chunks and carry their parent's span.
* ``dialogue``: turns are atomic units. Chat logs: a line starting with ``>``
  starts a user turn (consecutive ``>`` lines are one turn), and the reply runs
  up to the next ``>`` line or through a ``---`` line. Plays: a speaker label
  starts a turn — a block that is an upper-case name (``ROMEO``, ``LADY
  CAPULET.``), a title-case name of one to three words that recurs as a block in
  the section (``Nurse``, ``First Musician``), or — when fewer than three such
  blocks exist — a block beginning with an upper-case name and ``.`` or ``:``
  (``ROMEO. But soft!``) — and runs up to the
  next label or heading. Turns pack like ``structured`` units; a turn longer
  than ``max(max_turn, size)`` is cut like a long unit. Fewer than three turns
  in a section: ``paragraph``.

Only ``window`` overlaps; these strategies tile the text without overlap.
Chunks longer than ``size`` carry a reason (``Plan.reasons``): an atomic unit
(``table``, ``preformatted``, ``code fence``, ``dialogue turn``), a ``heading``
kept with its text, a ``short block joined`` to its neighbour or a ``short
tail`` (both at most ``size + min_size``), or a ``long grapheme cluster``.

The package, one job per module (each imports only the ones listed before it):
``units`` (tiles, fences, atomic regions, the units; the reasons), ``packing``
(cutting a long unit, the ``structured`` and ``paragraph`` packers),
``dialogue`` (turns and speakers), ``plans`` (:class:`Plan`, ``plan_section``
and the ``*_spans`` functions), ``headers`` (TOC paths, context headers) and
``stats`` (span and chunk statistics). None of them imports
:mod:`mindory.text.chunking`; the shared window and grapheme helpers come from
:mod:`mindory.text.windows`.
"""

from __future__ import annotations

from mindory.text.strategies.dialogue import find_turns
from mindory.text.strategies.headers import chunk_context_header, context_header, toc_path
from mindory.text.strategies.packing import _CLAUSE_R as _CLAUSE_R
from mindory.text.strategies.packing import _SENT_R as _SENT_R
from mindory.text.strategies.packing import _last_ascii_match_end as _last_ascii_match_end
from mindory.text.strategies.plans import (
    Plan,
    context_source_span,
    dialogue_spans,
    paragraph_spans,
    parent_child_spans,
    plan_section,
    structured_spans,
)
from mindory.text.strategies.stats import atomic_regions, chunk_stats, span_stats
from mindory.text.strategies.units import ATOMIC_REASONS, REASONS
from mindory.text.strategies.units import R_CLUSTER as R_CLUSTER
from mindory.text.strategies.units import R_FENCE as R_FENCE
from mindory.text.strategies.units import R_HEADING as R_HEADING
from mindory.text.strategies.units import R_JOINED as R_JOINED
from mindory.text.strategies.units import R_PRE as R_PRE
from mindory.text.strategies.units import R_TABLE as R_TABLE
from mindory.text.strategies.units import R_TAIL as R_TAIL
from mindory.text.strategies.units import R_TURN as R_TURN
from mindory.text.strategies.units import _section_units as _section_units
from mindory.text.strategies.units import _tiles as _tiles
from mindory.text.strategies.units import _units as _units

__all__ = [
    "ATOMIC_REASONS",
    "REASONS",
    "Plan",
    "atomic_regions",
    "chunk_context_header",
    "chunk_stats",
    "context_header",
    "context_source_span",
    "dialogue_spans",
    "find_turns",
    "paragraph_spans",
    "parent_child_spans",
    "plan_section",
    "span_stats",
    "structured_spans",
    "toc_path",
]
