job "web" {
  group "api" {
    task "server" {
      driver = "java"
      config {
        jar_path = "local/app.jar"
      }
    }
  }
}
