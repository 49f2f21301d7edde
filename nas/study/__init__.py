"""nas.study: the records of a study: what it is, what it spent, and what its trials found.

The plan of a search (:mod:`nas.study.settings`), its budget (:mod:`nas.study.budget`), objectives
(:mod:`nas.study.objectives`) and limits (:mod:`nas.study.constraints`), the terms a resume must keep
(:mod:`nas.study.terms`), the fidelity ladder's rules (:mod:`nas.study.fidelity`), the study's storage
(:mod:`nas.study.storage`, :mod:`nas.study.credentials`, :mod:`nas.study.study_file`), its manifest
(:mod:`nas.study.manifest`), its trials table and front (:mod:`nas.study.trials_table`,
:mod:`nas.study.pareto`, :mod:`nas.study.front`). It runs no trial: the engine (:mod:`nas.search`) does.

``import nas.study`` is cheap: it imports no submodule.
"""
