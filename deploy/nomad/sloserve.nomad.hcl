# The control plane and the API: registrar, dispatcher (two, sharing the query subjects' queue group),
# model-autoscaler, forecaster, vm-autoscaler and frontend, each a group of its own running the project's
# image (the repository's Dockerfile; SERVICE picks the service). NATS and Redis are found through
# Nomad's service discovery (deploy/nomad/nats.nomad.hcl, redis.nomad.hcl); the workers are the groups
# of deploy/nomad/executors.nomad.hcl, which the vm-autoscaler scales (PROVIDER=nomad).
# Each task connects to NATS as its service's user, the password from the Nomad variable nomad/jobs/sloserve
# (docs/SECURITY.md).
# Run: nomad job run -var image=<registry>/sloserve:<tag> deploy/nomad/sloserve.nomad.hcl

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "image" {
  type        = string
  description = "The project's image (docker build -t <registry>/sloserve:<tag> .)"
  default     = "sloserve:latest"
}

variable "nomad_token" {
  type        = string
  description = "ACL token the vm-autoscaler scales the executor groups with (needs scale-job on its namespace); empty without ACLs"
  default     = ""
}

locals {
  # Every service's connection settings, rendered into its environment from Nomad's service registry.
  bus_env = <<-EOF
    NATS_URL={{ range $i, $s := nomadService "sloserve-nats" }}{{ if $i }},{{ end }}nats://{{ .Address }}:{{ .Port }}{{ end }}
    REDIS_URL={{ range nomadService "sloserve-redis" }}redis://{{ .Address }}:{{ .Port }}{{ end }}
    JS_REPLICAS=3
    LOG_LEVEL=info
    METRICS_PORT=9464
  EOF
}

job "sloserve" {
  datacenters = var.datacenters
  type        = "service"

  group "registrar" {
    count = 1
    network {
      port "metrics" {
        to = 9464
      }
    }
    service {
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["registrar"]
    }
    task "registrar" {
      driver = "docker"
      config {
        image = var.image
        ports = ["metrics"]
      }
      env {
        SERVICE = "registrar"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=registrar
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .registrar }}{{ end }}
        EOF
      }
      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }

  group "dispatcher" {
    count = 2
    network {
      port "metrics" {
        to = 9464
      }
    }
    service {
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["dispatcher"]
    }
    task "dispatcher" {
      driver = "docker"
      config {
        image = var.image
        ports = ["metrics"]
      }
      env {
        SERVICE = "dispatcher"
        # Serverless overflow: off here; "lambda" with LAMBDA_FUNCTION (README, "Deploying: AWS").
        OVERFLOW = "off"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=dispatcher
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .dispatcher }}{{ end }}
        EOF
      }
      resources {
        cpu    = 1000
        memory = 512
      }
    }
  }

  group "model-autoscaler" {
    count = 1
    network {
      port "metrics" {
        to = 9464
      }
    }
    service {
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["model-autoscaler"]
    }
    task "model-autoscaler" {
      driver = "docker"
      config {
        image = var.image
        ports = ["metrics"]
      }
      env {
        SERVICE = "model-autoscaler"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=model-autoscaler
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .model_autoscaler }}{{ end }}
        EOF
      }
      resources {
        cpu    = 500
        memory = 512
      }
    }
  }

  group "forecaster" {
    count = 1
    network {
      port "metrics" {
        to = 9464
      }
    }
    service {
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["forecaster"]
    }
    task "forecaster" {
      driver = "docker"
      config {
        image = var.image
        ports = ["metrics"]
      }
      env {
        SERVICE = "forecaster"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=forecaster
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .forecaster }}{{ end }}
        EOF
      }
      resources {
        cpu    = 500
        memory = 512
      }
    }
  }

  group "vm-autoscaler" {
    count = 1
    network {
      port "metrics" {
        to = 9464
      }
    }
    service {
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["vm-autoscaler"]
    }
    task "vm-autoscaler" {
      driver = "docker"
      config {
        image = var.image
        ports = ["metrics"]
      }
      env {
        SERVICE  = "vm-autoscaler"
        PROVIDER = "nomad"
        # The groups executor-<kind> of this job (libs/providers nomad-workers.ts: NOMAD_EXECUTORS_JOB).
        NOMAD_JOB    = "sloserve-executors"
        NOMAD_ADDR   = "http://${attr.unique.network.ip-address}:4646"
        NOMAD_TOKEN  = var.nomad_token
        LAUNCH_KINDS = "cpu"
        # Within the executor groups' scaling bounds (executors.nomad.hcl).
        MIN_WORKERS = "1"
        MAX_WORKERS = "8"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=vm-autoscaler
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .vm_autoscaler }}{{ end }}
        EOF
      }
      resources {
        cpu    = 500
        memory = 512
      }
    }
  }

  group "frontend" {
    count = 1
    network {
      port "http" {
        static = 8080
        to     = 8080
      }
      port "grpc" {
        static = 8081
        to     = 8081
      }
    }
    service {
      name     = "sloserve-frontend"
      provider = "nomad"
      port     = "http"
      check {
        type     = "http"
        path     = "/v2/health/ready"
        interval = "10s"
        timeout  = "2s"
      }
    }
    service {
      # The frontend's metrics are on its HTTP port (GET /metrics).
      name     = "sloserve-metrics"
      provider = "nomad"
      port     = "http"
      tags     = ["frontend"]
    }
    task "frontend" {
      driver = "docker"
      config {
        image = var.image
        ports = ["http", "grpc"]
      }
      env {
        SERVICE   = "frontend"
        HTTP_PORT = "8080"
        GRPC_PORT = "8081"
        AUTH      = "true"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=frontend
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve" }}{{ .frontend }}{{ end }}
        EOF
      }
      # API keys on HTTP and gRPC (docs/SECURITY.md): the bootstrap admin key from the same Nomad variable
      # (nomad var put nomad/jobs/sloserve admin_key=$(openssl rand -hex 32) …, with the NATS passwords).
      template {
        destination = "secrets/auth.env"
        env         = true
        data        = <<-EOF
          SLOSERVE_ADMIN_KEY={{ with nomadVar "nomad/jobs/sloserve" }}{{ .admin_key }}{{ end }}
        EOF
      }
      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
