# One image for every service; SERVICE picks which one runs (see docker-compose.yml).
# BASE_IMAGE: any image with Node.js 20 and npm; scripts/docker-images.sh builds one without a registry.
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BASE_IMAGE}
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json .npmrc ./
COPY libs ./libs
COPY services ./services
COPY tsconfig.base.json tsconfig.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
ARG SERVICE=frontend
ENV SERVICE=${SERVICE}
CMD ["sh", "-c", "exec node --import tsx services/${SERVICE}/src/main.ts"]
