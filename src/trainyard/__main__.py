from trainyard.cli.main import app

app(prog_name="trainyard")
