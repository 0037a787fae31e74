"""Adaptive pressure (issue 47, in progress): a simulated user whose tactic a deterministic
controller chooses by the target's stance, measured against scripted pressure on the same
items. What is here so far: the scenario records a researcher brings (``scenarios``), the
controller (``controller``), the simulator's request and the rule flags on its turns
(``simulator``), and the conversation metrics (``metrics``: Turn of Flip, Number of Flip,
Kaplan-Meier survival by turn and by ladder rung, the per-arm summary with the flagged share,
paired arm contrasts and their Holm-adjusted family). It is not yet a registered protocol: no
stage runs it."""
