"""Layer batch: headless jobs over folders of files (retarget, in-fill, generate). May import retarget, tasks and every layer below."""
