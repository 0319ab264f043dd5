"""What a run reports: the typed model of ``report.json``, the fleet summary and the notes under the table,
the purchase mix as shares, strict JSON, and the check of an output folder.
"""
