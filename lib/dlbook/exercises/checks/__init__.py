"""One module per chapter, ``chNN_slug.py``, holding the checks of chapter NN's exercises.

Found by the chapter number of an exercise id ("16.1" -> ``ch16_*``) and
imported on first use (``dlbook.exercises.core.get_exercise``).
"""
