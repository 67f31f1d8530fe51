"""
The support modules: what the core (model.py, addrop.py, train.py, data.py) needs but a reader of the method
does not open first. checkpoint: Hugging Face safetensors in and out, atomic writes; settings: the paper's
Table 4 and train.py's command line; state: the run folder's lock, training state and stop signals; formats:
the readers of the task files, each bad row named by file and line; metrics: the tasks' scores and prediction
files; rdrop: R-Drop, the regularizer compared with AD-DROP; download: a missing GLUE task; cpu: a fair share of
a busy CPU.
Importing this package imports nothing else (cpu.fair_share must run before torch loads).
"""
