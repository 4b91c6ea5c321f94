# One image for every service; SERVICE picks which one runs (see docker-compose.yml).
FROM node:20-bookworm-slim
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
