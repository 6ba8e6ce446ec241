"""Layer families: one package per model family, each with its model, data, training, fill or generate, request-time learning and evaluation side by side. Each module ranks by its role (tests/repo/test_layers.py ``ROLES``) and may import the shared layers below that role; a family's modules may import one another.

| package | kind(s) | what it is |
|---|---|---|
| ``body`` | ``infill-body`` | the deterministic body in-fill: a smooth correction over Blender's Bezier, its gate and Learn This Action |
| ``hands`` | ``infill-hands`` | the deterministic hand in-fill: a ridge correction over Bezier per finger gap, its gate and learn |
| ``pfnn`` | ``pfnn``, ``phase-mlp`` | the phase-functioned biped controller, its feature layout and its phase-as-input baseline |
| ``mann`` | ``mann`` | the mode-adaptive quadruped controller and its feature layout |
| ``style`` | ``learnet-pfnn``, ``style-judge`` | the one-shot style learnet ``W = M1 diag(f(z)) M2``, its code fit, walks and judge |
| ``anyorder`` | ``anyorder`` | the any-order conditional transformer: elements, heads, sampling, training, benchmarks |

Module names say the role: ``model*`` (nets), ``features`` (layouts), ``fill``/``gate``/``adapt``/``loss``/``generate``
(what runs at request time), ``evaluate*`` (benchmarks), ``train*`` (training on the shared loop ``train.loop``)."""
