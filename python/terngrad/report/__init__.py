"""terngrad-bench: the report renderers, one package for every report of the project.

    python -m terngrad.report index  [--reports DIR] [--out F] ...   reports/index.md (+ html): what `terngrad report` runs
    python -m terngrad.report train  [--runs DIR] [--out DIR]         reports/train/README.md from the training runs
    python -m terngrad.report convex [DIR]                            reports/convex/README.md and figures

Modules: index, train, convex (one per report) and common (reading the tools' outputs, tables, figures).
Only the index's live section uses the compiled codec; scripts/reproduce-*.sh make the inputs again.
"""
