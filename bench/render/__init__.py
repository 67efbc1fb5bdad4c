"""render — the report's renderers (bench/report.py drives them).

common.py    shared helpers: comparisons, number formats, the row table, plot helpers
targets.py   the targets of bench/targets.toml, evaluated against a run
summary.py   the one-screen summary and the history of its ratios
micro.py     the fixed micro-benchmark sections (a table and a bar plot each)
ring.py      the ring benchmark
http.py      the HTTP section
preempt.py   fairness and wake-up latency under load
yieldpass.py the yield pass
scaling.py   throughput against cores
idlemem.py   memory per idle thread
prio.py      the prio scheduler: its cost against ws, priority classes over HTTP, the board

Each section module has render(data, rows, ctx) -> list of markdown lines,
writing its plots through ctx.save (see common.Ctx).
"""
