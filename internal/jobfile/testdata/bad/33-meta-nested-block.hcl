job "web" {
  meta {
    owner = "team-a"
    extra {
      note = "no"
    }
  }
  meta = { other = "x" }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/sleep" }
      env = ["PORT=8080"]
    }
  }
}
