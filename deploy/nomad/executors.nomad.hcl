# The workers: one group per hardware kind, each running that kind's executor. The vm-autoscaler
# (PROVIDER=nomad, deploy/nomad/sloserve.nomad.hcl) scales these groups through Nomad's job scale API
# (libs/providers nomad-workers.ts): job "sloserve-executors", groups "executor-<kind>", and every
# allocation's worker id "nomad-<allocation id>", which is how it tells its workers apart. Scale-downs
# stop an allocation with SIGTERM: the executor drains within kill_timeout.
# Each task connects to NATS as its service's user, the password from the Nomad variable nomad/jobs/sloserve-executors
# (docs/SECURITY.md).
# Run: nomad job run -var image=<registry>/sloserve:<tag> deploy/nomad/executors.nomad.hcl

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "image" {
  type        = string
  description = "The project's image (docker build -t <registry>/sloserve:<tag> .)"
  default     = "sloserve:latest"
}

locals {
  bus_env = <<-EOF
    NATS_URL={{ range $i, $s := nomadService "sloserve-nats" }}{{ if $i }},{{ end }}nats://{{ .Address }}:{{ .Port }}{{ end }}
    REDIS_URL={{ range nomadService "sloserve-redis" }}redis://{{ .Address }}:{{ .Port }}{{ end }}
    JS_REPLICAS=3
    LOG_LEVEL=info
  EOF
}

job "sloserve-executors" {
  datacenters = var.datacenters
  type        = "service"

  group "executor-cpu" {
    count = 1
    # The scale API keeps the count within these bounds; the vm-autoscaler's MAX_WORKERS should too.
    scaling {
      enabled = true
      min     = 0
      max     = 16
    }
    task "executor" {
      driver       = "docker"
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"
      config {
        image = var.image
      }
      env {
        SERVICE          = "executor-cpu"
        WORKER_ID        = "nomad-${NOMAD_ALLOC_ID}"
        WORKER_THREADS   = "2"
        WORKER_MEMORY_MB = "3072"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve-executors.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=executor
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve-executors" }}{{ .executor }}{{ end }}
        EOF
      }
      resources {
        cores  = 2
        memory = 4096
      }
    }
  }

  group "executor-gpu" {
    # Started by the vm-autoscaler (LAUNCH_KINDS=cpu,gpu) on clients with an NVIDIA GPU (device plugin),
    # from an image whose onnxruntime-node has the CUDA build.
    count = 0
    scaling {
      enabled = true
      min     = 0
      max     = 8
    }
    task "executor" {
      driver       = "docker"
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"
      config {
        image = var.image
      }
      env {
        SERVICE   = "executor-gpu"
        WORKER_ID = "nomad-${NOMAD_ALLOC_ID}"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve-executors.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=executor
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve-executors" }}{{ .executor }}{{ end }}
        EOF
      }
      resources {
        cpu    = 2000
        memory = 8192
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }

  group "executor-inferentia" {
    # On AWS Inferentia clients (inf1/inf2): the executor hands its batches to the Neuron-backed
    # inference server on the same host over Open Inference Protocol gRPC (NEURON_SERVER).
    count = 0
    scaling {
      enabled = true
      min     = 0
      max     = 8
    }
    constraint {
      attribute = "${attr.platform.aws.instance-type}"
      operator  = "regexp"
      value     = "^inf[12]\\."
    }
    task "executor" {
      driver       = "docker"
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"
      config {
        image        = var.image
        network_mode = "host"
      }
      env {
        SERVICE       = "executor-inferentia"
        WORKER_ID     = "nomad-${NOMAD_ALLOC_ID}"
        NEURON_SERVER = "127.0.0.1:8001"
      }
      template {
        data        = local.bus_env
        destination = "local/bus.env"
        env         = true
      }
      # Its NATS user (docs/SECURITY.md); the password from the Nomad variable nomad/jobs/sloserve-executors.
      template {
        destination = "secrets/nats.env"
        env         = true
        data        = <<-EOF
          NATS_USER=executor
          NATS_PASSWORD={{ with nomadVar "nomad/jobs/sloserve-executors" }}{{ .executor }}{{ end }}
        EOF
      }
      resources {
        cpu    = 2000
        memory = 4096
      }
    }
  }
}
