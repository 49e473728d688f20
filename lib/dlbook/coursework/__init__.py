"""The instructor's tools: student edition, grader, benchmark and the command line.

Installed with the optional extra ``pip install "dlbook[coursework]"``; a reader
who only runs chapters (in Colab, say) does not need them. See
``python -m dlbook --help`` and the book's appendix "For instructors".
"""
