"""Layer tasks: what users run in-process (path locomotion, paths, in-filling, style). May import retarget, train, models, features, data, io, core, errors."""
