"""What only the experiments use, apart from the reading path: ablate.py's grid, its runner, its reports and figures, a
finished run's numbers, the tuned lens, and the scripts that compute the experiment docs' tables (run as
`python lab/NAME.py`). They import lib/ and model.py; train.py, sample.py, prepare.py and lib/ never import them."""
