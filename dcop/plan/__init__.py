"""What is decided before a solve, from scopes, domain sizes and the machine: no table is built.

* ``memory``       bytes: the limit (``Limit``, ``effective_limit``), what the machine has
                   (``available_bytes``, ``resident_bytes``), ``human_bytes``; the backends' work
                   and device models
* ``bucket_plan``  the planned peak of a (mini-)bucket elimination run (``plan_for``, the one
                   owner), the largest MBE z that fits and the refusal's text
* ``seconds``      how long a planned BE run takes on the CPU (``cpu_be_seconds``), for ``auto``
* ``reuse``        plans kept within a process for the next call on the same structure
                   (``PlanMemo``, ``structure_key``; ``DCOP_PLAN_REUSE=0`` keeps none)

This room sits on the ground: the contraction engine, the GPU backends and ``dcop.inference`` all
read it, and it imports none of them. Import the submodules.
"""
