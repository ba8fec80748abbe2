"""The built-in model server: one trained model behind the Open Inference Protocol v2 REST API.

    python -m trainyard.serving.model_server --model PATH --name NAME --port PORT

``loaders`` reads model files into ``predictors``; ``protocol`` parses and writes the wire
format; ``app`` is the HTTP face (v2, the KServe v1 alias, ``/metrics``, the try page from
``page``). It imports nothing else of trainyard, so a service replica starts it quickly.
"""
