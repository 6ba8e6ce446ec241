"""Layer tasks: what users run in-process (path locomotion, paths, in-filling, style). May import models, train, features, data, io, core, errors."""
